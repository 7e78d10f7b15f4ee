"""``railyard admin``: users, tokens and queues. Every command needs an admin token, except
``tokens create --local``, which writes into the store directly: the recovery path when no
admin token works (run it as the server's Unix account, which can open the store)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from railyard.cli import siteadmin
from railyard.cli.args import (
    Command,
    Parser,
    connect,
    emit_json,
    fail,
    json_flag,
    parse_duration,
    subcommands,
)
from railyard.cli.text import table
from railyard.client.values import parse_priority, parse_walltime


def _quota(items: list[str] | None, option: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items or []:
        flavor, sep, gpus = item.partition("=")
        if not sep or not flavor or not gpus.isdigit():
            fail(f"{option}: expected FLAVOR=GPUS, got {item!r}")
        out[flavor] = int(gpus)
    return out


# -- users ---------------------------------------------------------------------------------------


def users_add(args: argparse.Namespace) -> None:
    """Add a user (then give them a token and a queue); their jobs run as --unix-user."""
    with connect() as client:
        user = client.create_user(args.name, is_admin=args.admin, unix_user=args.unix_user)
    if args.json:
        emit_json(user)
    else:
        print(f"user {user['name']} added (id {user['id']}, Unix account {user['unix_user']})")


def _users_add_args(p: Parser) -> None:
    p.add_argument("name", metavar="USER")
    p.add_argument("--admin", action="store_true", help="may administer railyard")
    p.add_argument("--unix-user", help="Unix account the user's jobs run as (default: USER)")
    json_flag(p)


def users_update(args: argparse.Namespace) -> None:
    """Change a user's Unix account or admin flag; submitted jobs keep their account."""
    changes: dict[str, Any] = {}
    if args.unix_user is not None:
        changes["unix_user"] = args.unix_user
    if args.admin is not None:
        changes["is_admin"] = args.admin
    if not changes:
        fail("users update: nothing to change (hint: --unix-user U, --admin or --no-admin)")
    with connect() as client:
        user = client.update_user(args.name, changes)
    if args.json:
        emit_json(user)
    else:
        role = "admin" if user["is_admin"] else "user"
        print(f"user {user['name']} updated ({role}, Unix account {user['unix_user']})")


def _users_update_args(p: Parser) -> None:
    p.add_argument("name", metavar="USER")
    p.add_argument("--unix-user", help="Unix account the user's jobs run as")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--admin", dest="admin", action="store_true", default=None)
    group.add_argument("--no-admin", dest="admin", action="store_false")
    json_flag(p)


def users_remove(args: argparse.Namespace) -> None:
    """Remove a user with their tokens and queue memberships (never the last admin, never a
    user whose jobs are in the store)."""
    with connect() as client:
        user = client.delete_user(args.name)
    emit_json(user) if args.json else print(f"user {user['name']} removed")


def _users_remove_args(p: Parser) -> None:
    p.add_argument("name", metavar="USER")
    json_flag(p)


def users_list(args: argparse.Namespace) -> None:
    """Users, their Unix accounts, whether they are admins, and their queues."""
    with connect() as client:
        users = client.users()
    if args.json:
        emit_json(users)
        return
    rows = [
        [
            str(u["id"]),
            u["name"],
            u.get("unix_user", ""),
            "yes" if u["is_admin"] else "",
            ",".join(u["queues"]),
        ]
        for u in users
    ]
    print(table(("ID", "USER", "UNIX USER", "ADMIN", "QUEUES"), rows))


# -- tokens --------------------------------------------------------------------------------------


def parse_lifetime(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``3600s`` or ``3600`` (seconds) to seconds."""
    return parse_duration(text, "--expires")


def _local_token(
    user: str,
    label: str,
    expires_in_s: float | None,
    state_dir: Path | None,
    url: str | None,
    *,
    make_admin: bool = False,
) -> tuple[int, str, float | None, str | None]:
    """(id, plaintext, expiry, what was done to the user) of a token written straight into
    the store; with ``make_admin`` the user is made (or created as) an admin first."""
    # Only this recovery path opens the store from the CLI: import it here, not for every
    # `railyard admin` call.
    from railyard.client.config import default_state_dir
    from railyard.control.errors import ServiceError
    from railyard.control.store.database import Store, sqlite_url
    from railyard.control.store.paths import database_path
    from railyard.control.usecases.users import create_token_locally, restore_admin_locally

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
            done = restore_admin_locally(session, user, now) if make_admin else None
            token, plaintext = create_token_locally(session, user, label, now, expires_t_s=expires)
            return token.id, plaintext, token.expires_t_s, done
    except ServiceError as exc:
        fail(exc.line())
    finally:
        store.close()


def tokens_create(args: argparse.Namespace) -> None:
    """Create a token for USER; it is printed once and stored only as a hash.

    With --local the token is written straight into the store, without the API: the way
    back in when no admin token works. Run it as the server's Unix account. --local --admin
    also makes USER an admin (creating the user if missing): the way back when no admin is
    left.
    """
    expires_in_s = parse_lifetime(args.expires) if args.expires is not None else None
    user_arg = args.user_flag or args.user
    if args.local:
        user = user_arg or "admin"
        token_id, plaintext, expiry, done = _local_token(
            user,
            args.label or "local recovery",
            expires_in_s,
            args.state_dir,
            args.database_url,
            make_admin=args.admin,
        )
        if done is not None:
            print(f"railyard: {done}", file=sys.stderr)
        if args.json:
            emit_json({"id": token_id, "user": user, "token": plaintext, "expires_t_s": expiry,
                       "admin": done})  # fmt: skip
        else:
            print(plaintext)
        return
    if args.state_dir is not None or args.database_url is not None:
        fail("--state-dir and --database-url go with --local")
    if args.admin:
        fail("--admin goes with --local (hint: through the API: admin users update USER --admin)")
    if user_arg is None:
        fail("USER: missing (hint: railyard admin tokens create USER)")
    with connect() as client:
        token = client.create_token(user_arg, args.label, expires_in_s=expires_in_s)
    emit_json(token) if args.json else print(token["token"])


def _tokens_create_args(p: Parser) -> None:
    p.add_argument("user", nargs="?", metavar="USER", help="whose token (with --local: admin)")
    p.add_argument("--user", dest="user_flag", metavar="USER", help="the same as USER")
    p.add_argument("--label", default="", help="what the token is for")
    p.add_argument(
        "--expires", metavar="LIFETIME", help="e.g. 30d, 12h, 90m (default: never expires)"
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="write the token straight into the store, without the API: recovery when no "
        "admin token works (run as the server's user)",
    )
    p.add_argument(
        "--admin",
        action="store_true",
        help="with --local: make USER an admin (create it if missing), e.g. after the last "
        "admin lost the flag",
    )
    p.add_argument("--state-dir", type=Path, help="with --local: the server's state directory")
    p.add_argument("--database-url", help="with --local: the server's --database-url")
    json_flag(p)


def _when(t_s: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(t_s)) if t_s is not None else ""


def tokens_list(args: argparse.Namespace) -> None:
    """Tokens: whose, what for, whether revoked, and when they expire."""
    with connect() as client:
        tokens = client.tokens()
    if args.json:
        emit_json(tokens)
        return
    now = time.time()
    rows = []
    for t in tokens:
        expiry = t.get("expires_t_s")
        expired = expiry is not None and expiry <= now
        expires = _when(expiry) + (" (expired)" if expired else "")
        rows.append([str(t["id"]), t["user"], t["label"], "yes" if t["revoked"] else "", expires])
    print(table(("ID", "USER", "LABEL", "REVOKED", "EXPIRES (UTC)"), rows))


def tokens_revoke(args: argparse.Namespace) -> None:
    """Revoke a token: requests with it get 401 from now on."""
    with connect() as client:
        token = client.revoke_token(args.token_id)
    emit_json(token) if args.json else print(f"token {token['id']} of {token['user']} revoked")


def _tokens_revoke_args(p: Parser) -> None:
    p.add_argument("token_id", type=int, metavar="TOKEN_ID")
    json_flag(p)


# -- queues --------------------------------------------------------------------------------------


def _quota_args(p: Parser) -> None:
    for flag in ("--nominal", "--borrowing-limit", "--lending-limit"):
        p.add_argument(
            flag, action="append", metavar="FLAVOR=GPUS", help="e.g. H100-SXM-80GB=8 (repeat)"
        )


def _limit_args(p: Parser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--priority-preemption",
        dest="priority_preemption",
        action="store_true",
        default=None,
        help="its jobs may preempt lower-priority jobs (off by default, as in Slurm)",
    )
    group.add_argument("--no-priority-preemption", dest="priority_preemption", action="store_false")
    default = p.add_mutually_exclusive_group()
    default.add_argument(
        "--default",
        dest="is_default",
        action="store_true",
        default=None,
        help="a job for its parent (one that names no partition: default) comes here "
        "(Slurm's Default=YES; its siblings lose it)",
    )
    default.add_argument("--no-default", dest="is_default", action="store_false")
    times = "D-HH:MM:SS, HH:MM:SS or minutes"
    p.add_argument("--default-time", help=f"limit of jobs that give none (DefaultTime; {times})")
    p.add_argument("--max-time", help=f"largest limit a job may ask (MaxTime; {times})")
    p.add_argument(
        "--max-min-runtime",
        help=f"bound on a job's protection from preemption ({times}; default 1:00:00)",
    )
    p.add_argument("--max-grace", help=f"bound on a job's checkpoint grace ({times})")
    p.add_argument(
        "--pool",
        help="its jobs run on this node pool only (a blueprint's node group 'pool'); "
        "'none': unpooled nodes",
    )
    p.add_argument(
        "--container-mounts",
        metavar="PREFIX,...",
        help="paths its jobs' containers may mount beyond home and workdir ('none': no "
        "list of its own, the parent's)",
    )
    p.add_argument(
        "--idle-limit",
        help=f"stop an interactive job (run, alloc, a notebook) unused this long ({times}; "
        "0: never)",
    )
    p.add_argument(
        "--max-priority",
        metavar="PRIORITY",
        help="the most priority a plain member may ask (admins any): an integer or "
        "low|normal|high|critical (default normal)",
    )


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    """The queue's time limits (Slurm partition DefaultTime/MaxTime) and bounds on what its
    jobs may claim, from the options given."""
    out: dict[str, Any] = {}
    if args.priority_preemption is not None:
        out["priority_preemption"] = args.priority_preemption
    if args.is_default is not None:
        out["is_default"] = args.is_default
    if args.pool is not None:
        out["pool"] = None if args.pool == "none" else args.pool
    if args.container_mounts is not None:
        prefixes = [p.strip() for p in args.container_mounts.split(",") if p.strip()]
        out["container_mounts"] = None if args.container_mounts == "none" else prefixes
    if args.max_priority is not None:
        try:
            out["max_priority"] = parse_priority(args.max_priority)
        except ValueError as exc:
            fail(f"--max-priority: {exc}")
    for key, value, option in (
        ("default_time_s", args.default_time, "--default-time"),
        ("max_time_s", args.max_time, "--max-time"),
        ("max_min_runtime_s", args.max_min_runtime, "--max-min-runtime"),
        ("max_checkpoint_grace_s", args.max_grace, "--max-grace"),
        ("idle_limit_s", args.idle_limit, "--idle-limit"),
    ):
        if value is None:
            continue
        try:
            seconds = parse_walltime(value)
        except ValueError as exc:
            fail(f"{option}: {exc}")
        if key in ("default_time_s", "max_time_s", "idle_limit_s"):
            out[key] = seconds  # "0" or "UNLIMITED": no limit
        else:
            out[key] = seconds or 0.0  # "0": no protection, no grace
    return out


def queues_add(args: argparse.Namespace) -> None:
    """Add a queue with a nominal quota per GPU flavor."""
    spec = {
        "name": args.name,
        "parent": args.parent,
        "nominal_gpus": _quota(args.nominal, "--nominal"),
        "borrowing_limit_gpus": _quota(args.borrowing_limit, "--borrowing-limit"),
        "lending_limit_gpus": _quota(args.lending_limit, "--lending-limit"),
        "weight": args.weight,
        **_limits(args),
    }
    with connect() as client:
        queue = client.create_queue(spec)
    emit_json(queue) if args.json else print(f"queue {queue['name']} added")


def _queues_add_args(p: Parser) -> None:
    p.add_argument("name", metavar="QUEUE")
    p.add_argument("--parent", help="parent queue")
    _quota_args(p)
    p.add_argument("--weight", type=float, default=1.0, help="fair-share weight")
    _limit_args(p)
    json_flag(p)


def queues_update(args: argparse.Namespace) -> None:
    """Change a queue; options left out keep their value (a quota option replaces the map)."""
    changes = _limits(args)
    if args.parent is not None:
        changes["parent"] = args.parent or None
    for key, items, option in (
        ("nominal_gpus", args.nominal, "--nominal"),
        ("borrowing_limit_gpus", args.borrowing_limit, "--borrowing-limit"),
        ("lending_limit_gpus", args.lending_limit, "--lending-limit"),
    ):
        if items is not None:
            changes[key] = _quota(items, option)
    if args.weight is not None:
        changes["weight"] = args.weight
    with connect() as client:
        queue = client.update_queue(args.name, changes)
    emit_json(queue) if args.json else print(f"queue {queue['name']} updated")


def _queues_update_args(p: Parser) -> None:
    p.add_argument("name", metavar="QUEUE")
    p.add_argument("--parent", help="new parent ('' for a root)")
    _quota_args(p)
    p.add_argument("--weight", type=float, help="fair-share weight")
    _limit_args(p)
    json_flag(p)


def members_add(args: argparse.Namespace) -> None:
    """Let USER submit to QUEUE and every queue below it."""
    with connect() as client:
        out = client.add_member(args.queue, args.user)
    emit_json(out) if args.json else print(f"{args.user} may submit to {args.queue}")


def members_remove(args: argparse.Namespace) -> None:
    """Stop USER submitting to QUEUE."""
    with connect() as client:
        out = client.remove_member(args.queue, args.user)
    emit_json(out) if args.json else print(f"{args.user} removed from {args.queue}")


def _member_args(p: Parser) -> None:
    p.add_argument("queue", metavar="QUEUE")
    p.add_argument("user", metavar="USER")
    json_flag(p)


# -- the tree ------------------------------------------------------------------------------------
# A group's function only carries its help: argparse requires one of its sub-commands.


def admin(_: argparse.Namespace) -> None:
    """Administer users, tokens and queues (admin token needed)."""


def users(_: argparse.Namespace) -> None:
    """Users."""


def tokens(_: argparse.Namespace) -> None:
    """Bearer tokens."""


def queues(_: argparse.Namespace) -> None:
    """Queues: quota per GPU flavor, fair-share weight, members."""


def members(_: argparse.Namespace) -> None:
    """Who may submit to a queue (and the queues below it)."""


def _users_args(p: Parser) -> None:
    subcommands(
        p,
        Command("add", users_add, _users_add_args),
        Command("update", users_update, _users_update_args),
        Command("remove", users_remove, _users_remove_args),
        Command("list", users_list, json_flag),
    )


def _tokens_args(p: Parser) -> None:
    subcommands(
        p,
        Command("create", tokens_create, _tokens_create_args),
        Command("list", tokens_list, json_flag),
        Command("revoke", tokens_revoke, _tokens_revoke_args),
    )


def _members_args(p: Parser) -> None:
    subcommands(
        p,
        Command("add", members_add, _member_args),
        Command("remove", members_remove, _member_args),
    )


def _queues_args(p: Parser) -> None:
    subcommands(
        p,
        Command("add", queues_add, _queues_add_args),
        Command("update", queues_update, _queues_update_args),
        Command("members", members, _members_args),
    )


def _admin_args(p: Parser) -> None:
    subcommands(
        p,
        Command("users", users, _users_args),
        Command("tokens", tokens, _tokens_args),
        Command("queues", queues, _queues_args),
        Command("install-service", siteadmin.install_service, siteadmin.install_args),
        Command("backup", siteadmin.backup, siteadmin.store_args),
        Command("restore", siteadmin.restore, siteadmin.store_args),
    )


COMMANDS = (Command("admin", admin, _admin_args),)
