"""``railyard admin``: users, tokens and queues. Every command needs an admin token.

Register with ``app.add_typer(admin.app, name="admin")`` (or :func:`register`).
"""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from railyard.cli.jobs import JsonOpt, connect, emit_json, fail
from railyard.control.schemas import QueueCreate, QueueUpdate, parse_walltime, validation_line

app = typer.Typer(help="Administer users, tokens and queues (admin token needed).")
users_app = typer.Typer(help="Users.")
tokens_app = typer.Typer(help="Bearer tokens.")
queues_app = typer.Typer(help="Queues: quota per GPU flavor, fair-share weight, members.")
members_app = typer.Typer(help="Who may submit to a queue (and the queues below it).")
app.add_typer(users_app, name="users")
app.add_typer(tokens_app, name="tokens")
app.add_typer(queues_app, name="queues")
queues_app.add_typer(members_app, name="members")

QuotaOpt = Annotated[
    list[str] | None, typer.Option(help="FLAVOR=GPUS, e.g. H100-SXM-80GB=8 (repeat)")
]


def _table(*columns: str) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, no_wrap=True)
    return table


@users_app.command("add")
def users_add(
    name: str,
    admin: Annotated[bool, typer.Option("--admin", help="may administer railyard")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add a user (then give them a token and a queue)."""
    with connect() as client:
        user = client.create_user(name, is_admin=admin)
    emit_json(user) if as_json else print(f"user {user.name} added (id {user.id})")


@users_app.command("list")
def users_list(as_json: JsonOpt = False) -> None:
    with connect() as client:
        users = client.users()
    if as_json:
        emit_json(users)
        return
    table = _table("ID", "USER", "ADMIN", "QUEUES")
    for u in users:
        table.add_row(str(u.id), u.name, "yes" if u.is_admin else "", ",".join(u.queues))
    Console().print(table)


@tokens_app.command("create")
def tokens_create(
    user: str,
    label: Annotated[str, typer.Option(help="what the token is for")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Create a token for USER; it is printed once and stored only as a hash."""
    with connect() as client:
        token = client.create_token(user, label)
    emit_json(token) if as_json else print(token.token)


@tokens_app.command("list")
def tokens_list(as_json: JsonOpt = False) -> None:
    with connect() as client:
        tokens = client.tokens()
    if as_json:
        emit_json(tokens)
        return
    table = _table("ID", "USER", "LABEL", "REVOKED")
    for t in tokens:
        table.add_row(str(t.id), t.user, t.label, "yes" if t.revoked else "")
    Console().print(table)


@tokens_app.command("revoke")
def tokens_revoke(token_id: int, as_json: JsonOpt = False) -> None:
    """Revoke a token: requests with it get 401 from now on."""
    with connect() as client:
        token = client.revoke_token(token_id)
    emit_json(token) if as_json else print(f"token {token.id} of {token.user} revoked")


def _quota(items: list[str] | None, option: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items or []:
        flavor, sep, gpus = item.partition("=")
        if not sep or not flavor or not gpus.isdigit():
            fail(f"{option}: expected FLAVOR=GPUS, got {item!r}")
        out[flavor] = int(gpus)
    return out


PriorityPreemptionOpt = Annotated[
    bool | None,
    typer.Option(
        "--priority-preemption/--no-priority-preemption",
        help="its jobs may preempt lower-priority jobs (off by default, as in Slurm)",
    ),
]
TimeOpt = Annotated[str | None, typer.Option(help="D-HH:MM:SS, HH:MM:SS or minutes")]


def _limits(
    priority_preemption: bool | None,
    default_time: str | None,
    max_time: str | None,
    max_min_runtime: str | None,
    max_grace: str | None,
) -> dict[str, object]:
    """The queue's time limits (Slurm partition DefaultTime/MaxTime) and bounds on what its
    jobs may claim, from the options given."""
    out: dict[str, object] = {}
    if priority_preemption is not None:
        out["priority_preemption"] = priority_preemption
    for key, value, option in (
        ("default_time_s", default_time, "--default-time"),
        ("max_time_s", max_time, "--max-time"),
        ("max_min_runtime_s", max_min_runtime, "--max-min-runtime"),
        ("max_checkpoint_grace_s", max_grace, "--max-grace"),
    ):
        if value is None:
            continue
        try:
            seconds = parse_walltime(value)
        except ValueError as exc:
            fail(f"{option}: {exc}")
        if key in ("default_time_s", "max_time_s"):
            out[key] = seconds  # "0" or "UNLIMITED": no limit
        else:
            out[key] = seconds or 0.0  # "0": no protection, no grace
    return out


@queues_app.command("add")
def queues_add(
    name: str,
    parent: Annotated[str | None, typer.Option(help="parent queue")] = None,
    nominal: QuotaOpt = None,
    borrowing_limit: QuotaOpt = None,
    lending_limit: QuotaOpt = None,
    weight: Annotated[float, typer.Option(help="fair-share weight")] = 1.0,
    priority_preemption: PriorityPreemptionOpt = None,
    default_time: TimeOpt = None,
    max_time: TimeOpt = None,
    max_min_runtime: TimeOpt = None,
    max_grace: TimeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a queue with a nominal quota per GPU flavor."""
    limits = _limits(priority_preemption, default_time, max_time, max_min_runtime, max_grace)
    try:
        spec = QueueCreate.model_validate(
            {
                "name": name,
                "parent": parent,
                "nominal_gpus": _quota(nominal, "--nominal"),
                "borrowing_limit_gpus": _quota(borrowing_limit, "--borrowing-limit"),
                "lending_limit_gpus": _quota(lending_limit, "--lending-limit"),
                "weight": weight,
                **limits,
            }
        )
    except ValidationError as exc:
        fail(validation_line(list(exc.errors()))[0])
    with connect() as client:
        queue = client.create_queue(spec)
    emit_json(queue) if as_json else print(f"queue {queue.name} added")


@queues_app.command("update")
def queues_update(
    name: str,
    parent: Annotated[str | None, typer.Option(help="new parent ('' for a root)")] = None,
    nominal: QuotaOpt = None,
    borrowing_limit: QuotaOpt = None,
    lending_limit: QuotaOpt = None,
    weight: Annotated[float | None, typer.Option(help="fair-share weight")] = None,
    priority_preemption: PriorityPreemptionOpt = None,
    default_time: TimeOpt = None,
    max_time: TimeOpt = None,
    max_min_runtime: TimeOpt = None,
    max_grace: TimeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Change a queue; options left out keep their value (a quota option replaces the map)."""
    changes = _limits(priority_preemption, default_time, max_time, max_min_runtime, max_grace)
    if parent is not None:
        changes["parent"] = parent or None
    for key, items, option in (
        ("nominal_gpus", nominal, "--nominal"),
        ("borrowing_limit_gpus", borrowing_limit, "--borrowing-limit"),
        ("lending_limit_gpus", lending_limit, "--lending-limit"),
    ):
        if items is not None:
            changes[key] = _quota(items, option)
    if weight is not None:
        changes["weight"] = weight
    try:
        spec = QueueUpdate.model_validate(changes)
    except ValidationError as exc:
        fail(validation_line(list(exc.errors()))[0])
    with connect() as client:
        queue = client.update_queue(name, spec)
    emit_json(queue) if as_json else print(f"queue {queue.name} updated")


@members_app.command("add")
def members_add(queue: str, user: str, as_json: JsonOpt = False) -> None:
    """Let USER submit to QUEUE and every queue below it."""
    with connect() as client:
        out = client.add_member(queue, user)
    emit_json(out) if as_json else print(f"{user} may submit to {queue}")


@members_app.command("remove")
def members_remove(queue: str, user: str, as_json: JsonOpt = False) -> None:
    with connect() as client:
        out = client.remove_member(queue, user)
    emit_json(out) if as_json else print(f"{user} removed from {queue}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="admin")
