"""``railyard admin``: users, tokens and queues. Every command needs an admin token, except
``tokens create --local``, which reads the store directly (the recovery path when no admin
token works: run it as the server's Unix account, which can open the store).

Register with ``app.add_typer(admin.app, name="admin")`` (or :func:`register`).
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from railyard.cli.jobs import JsonOpt, connect, emit_json, fail
from railyard.control.schemas import QueueCreate, QueueUpdate, validation_line

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


_DURATION = re.compile(r"^(\d{1,9})([smhdw]?)$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``3600s`` or ``3600`` (seconds) to seconds."""
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) == 0:
        fail(f"--expires: bad duration {text!r} (hint: e.g. 30d, 12h, 90m or 3600s)")
    return float(int(match.group(1)) * _UNIT_S[match.group(2)])


def _local_token(
    user: str, label: str, expires_in_s: float | None, state_dir: Path | None, url: str | None
) -> tuple[int, str, float | None]:
    """(id, plaintext, expiry) of a token written straight into the store."""
    # Only this recovery path opens the store from the CLI: import it here, not for every
    # `railyard admin` call.
    from railyard.control.errors import ServiceError
    from railyard.control.paths import database_path, default_state_dir
    from railyard.control.store import Store, sqlite_url
    from railyard.control.users import create_token_locally

    if url is None:
        db = database_path(state_dir or default_state_dir())
        if not db.is_file():
            fail(f"no store at {db} (hint: give the server's --state-dir or --database-url)")
        url = sqlite_url(db)
    now = time.time()
    expires = now + expires_in_s if expires_in_s is not None else None
    try:
        store = Store(url)
    except Exception as exc:  # a bad URL, a missing driver, no server: one line, exit 2
        fail(f"cannot open the store: {str(exc).splitlines()[0]}")
    try:
        with store.session() as session:
            token, plaintext = create_token_locally(session, user, label, now, expires_t_s=expires)
            return token.id, plaintext, token.expires_t_s
    except ServiceError as exc:
        fail(exc.line())
    finally:
        store.close()


@tokens_app.command("create")
def tokens_create(
    user: Annotated[str | None, typer.Argument(help="whose token (with --local: admin)")] = None,
    user_option: Annotated[str | None, typer.Option("--user", help="the same as USER")] = None,
    label: Annotated[str, typer.Option(help="what the token is for")] = "",
    expires: Annotated[
        str | None, typer.Option(help="lifetime, e.g. 30d, 12h, 90m (default: never expires)")
    ] = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="write the token straight into the store, without the API: recovery when "
            "no admin token works (run as the server's user)",
        ),
    ] = False,
    state_dir: Annotated[
        Path | None, typer.Option(help="with --local: the server's state directory")
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="with --local: the server's --database-url")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a token for USER; it is printed once and stored only as a hash."""
    expires_in_s = parse_duration(expires) if expires is not None else None
    if user is not None and user_option is not None and user != user_option:
        fail(f"USER {user!r} and --user {user_option!r} disagree")
    user = user or user_option
    if local:
        token_id, plaintext, expiry = _local_token(
            user or "admin", label or "local recovery", expires_in_s, state_dir, database_url
        )
        if as_json:
            print(json.dumps({"id": token_id, "user": user or "admin", "token": plaintext,
                              "expires_t_s": expiry}))  # fmt: skip
        else:
            print(plaintext)
        return
    if state_dir is not None or database_url is not None:
        fail("--state-dir and --database-url go with --local")
    if user is None:
        fail("USER: missing (hint: railyard admin tokens create USER)")
    with connect() as client:
        token = client.create_token(user, label, expires_in_s=expires_in_s)
    emit_json(token) if as_json else print(token.token)


def _when(t_s: float | None) -> str:
    return datetime.fromtimestamp(t_s, UTC).strftime("%Y-%m-%d %H:%M") if t_s else ""


@tokens_app.command("list")
def tokens_list(as_json: JsonOpt = False) -> None:
    with connect() as client:
        tokens = client.tokens()
    if as_json:
        emit_json(tokens)
        return
    table = _table("ID", "USER", "LABEL", "REVOKED", "EXPIRES (UTC)")
    now = time.time()
    for t in tokens:
        expired = t.expires_t_s is not None and t.expires_t_s <= now
        expires = _when(t.expires_t_s) + (" (expired)" if expired else "")
        table.add_row(str(t.id), t.user, t.label, "yes" if t.revoked else "", expires)
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
