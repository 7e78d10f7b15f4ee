"""``railyard login`` and ``logout``: a user connects in one command. The token is checked
against the server (``/v1/whoami``) before it is saved, so a typo is caught at once and not at
the first ``submit``; ``RAILYARD_URL`` and ``RAILYARD_TOKEN`` still override what is saved."""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from railyard.cli.args import Command, Parser, fail
from railyard.client.client import Client, ClientError
from railyard.client.config import (
    ConfigError,
    default_state_dir,
    forget_login,
    read_saved,
    write_login,
)

TOKEN_HINT = "ask your railyard admin for a token (railyard admin tokens create USER)"


def _read_token(url: str, from_stdin: bool) -> str:
    if from_stdin:
        token = sys.stdin.readline().strip()
    elif not sys.stdin.isatty():
        fail("login: no terminal to ask for the token on (hint: pipe it in with --token-stdin)")
    else:
        token = getpass.getpass(f"token for {url}: ").strip()
    if not token:
        fail(f"login: no token given (hint: {TOKEN_HINT})")
    return token


def login(args: argparse.Namespace) -> None:
    """Save a server's URL and your token in ~/.railyard (0600), checked against the server.

    The token is asked for without echo, or read from stdin with --token-stdin (never give it
    on the command line: other users see a process's arguments). RAILYARD_URL and
    RAILYARD_TOKEN, when set, override what is saved; `railyard logout` forgets it.
    """
    state_dir = default_state_dir()
    try:
        saved_url, _ = read_saved(state_dir / "client.json")
    except ConfigError:
        saved_url = None
    url = args.url or os.environ.get("RAILYARD_URL") or saved_url
    if not url:
        fail("login: which server? (hint: railyard login http://HOST:8765; ask your admin)")
    token = _read_token(url, args.token_stdin)
    try:
        with Client(url, token, timeout_s=args.timeout) as client:
            me = client.whoami()
    except ClientError as exc:
        if exc.status == 401:
            fail(f"login: {url} refused the token: {exc.detail} (hint: {TOKEN_HINT})", 1)
        fail(f"login: {exc.detail}", 2 if exc.status in (400, 422) else 1)
    try:
        path = write_login(url, token, state_dir)
    except ConfigError as exc:
        fail(f"login: {exc}", 1)
    role = " (admin)" if me.get("is_admin") else ""
    print(f"logged in to {url} as {me['name']}{role}; saved to {path}")
    if os.environ.get("RAILYARD_URL") or os.environ.get("RAILYARD_TOKEN"):
        print("note: RAILYARD_URL / RAILYARD_TOKEN are set and override the saved login")


def _login_args(p: Parser) -> None:
    p.add_argument("url", nargs="?", metavar="URL", help="the server, e.g. http://head:8765")
    p.add_argument(
        "--token-stdin", action="store_true", help="read the token from stdin (for scripts)"
    )
    p.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for the server (30)"
    )


def logout(_: argparse.Namespace) -> None:
    """Forget the saved server and token (~/.railyard/client.json)."""
    removed = forget_login(default_state_dir())
    print(f"removed {removed}" if removed else "not logged in: nothing saved")


COMMANDS = (Command("login", login, _login_args), Command("logout", logout, lambda _: None))
