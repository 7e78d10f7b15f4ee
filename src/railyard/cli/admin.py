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
from railyard.control.schemas import (
    QueueCreate,
    QueueUpdate,
    UserCreate,
    UserUpdate,
    validation_line,
)

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


UnixUserOpt = Annotated[
    str | None, typer.Option("--unix-user", help="Unix account the user's jobs run as")
]


@users_app.command("add")
def users_add(
    name: str,
    admin: Annotated[bool, typer.Option("--admin", help="may administer railyard")] = False,
    unix_user: Annotated[
        str | None,
        typer.Option("--unix-user", help="Unix account the user's jobs run as (default: NAME)"),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a user (then give them a token and a queue); their jobs run as --unix-user."""
    try:
        UserCreate(name=name, is_admin=admin, unix_user=unix_user)
    except ValidationError as exc:
        fail(validation_line(list(exc.errors()))[0])
    with connect() as client:
        user = client.create_user(name, is_admin=admin, unix_user=unix_user)
    if as_json:
        emit_json(user)
    else:
        print(f"user {user.name} added (id {user.id}, Unix account {user.unix_user})")


@users_app.command("update")
def users_update(
    name: str,
    unix_user: UnixUserOpt = None,
    admin: Annotated[bool | None, typer.Option("--admin/--no-admin")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Change a user's Unix account or admin flag; submitted jobs keep their account."""
    try:
        spec = UserUpdate(unix_user=unix_user, is_admin=admin)
    except ValidationError as exc:
        fail(validation_line(list(exc.errors()))[0])
    with connect() as client:
        user = client.update_user(name, spec)
    if as_json:
        emit_json(user)
    else:
        role = "admin" if user.is_admin else "user"
        print(f"user {user.name} updated ({role}, Unix account {user.unix_user})")


@users_app.command("list")
def users_list(as_json: JsonOpt = False) -> None:
    with connect() as client:
        users = client.users()
    if as_json:
        emit_json(users)
        return
    table = _table("ID", "USER", "UNIX USER", "ADMIN", "QUEUES")
    for u in users:
        admin = "yes" if u.is_admin else ""
        table.add_row(str(u.id), u.name, u.unix_user, admin, ",".join(u.queues))
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


@queues_app.command("add")
def queues_add(
    name: str,
    parent: Annotated[str | None, typer.Option(help="parent queue")] = None,
    nominal: QuotaOpt = None,
    borrowing_limit: QuotaOpt = None,
    lending_limit: QuotaOpt = None,
    weight: Annotated[float, typer.Option(help="fair-share weight")] = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Add a queue with a nominal quota per GPU flavor."""
    try:
        spec = QueueCreate(
            name=name,
            parent=parent,
            nominal_gpus=_quota(nominal, "--nominal"),
            borrowing_limit_gpus=_quota(borrowing_limit, "--borrowing-limit"),
            lending_limit_gpus=_quota(lending_limit, "--lending-limit"),
            weight=weight,
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
    as_json: JsonOpt = False,
) -> None:
    """Change a queue; options left out keep their value (a quota option replaces the map)."""
    changes: dict[str, object] = {}
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
