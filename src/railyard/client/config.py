"""Where the client finds its server: ``RAILYARD_URL``/``RAILYARD_TOKEN``, else the state
directory's ``client.json`` that ``railyard login`` (a user) or ``railyard up`` (its admin)
writes.

The state directory is ``$RAILYARD_HOME`` or ``~/.railyard``; the server keeps its store there
too (:mod:`railyard.control.store.paths`), so both sides read its default from here. The file
holds a bearer token: it is 0600 in a 0700 directory of the user's own, and a directory that
is a symlink, someone else's, or writable by group or others is refused (whoever can write
there could swap the file and read the next token written, or point the CLI at their server).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

STATE_DIR_MODE = 0o700
CONFIG_FILE_MODE = 0o600
LOGIN_HINT = (
    "ask your railyard admin for a token and the server's address, then run "
    "`railyard login URL` (or set RAILYARD_URL and RAILYARD_TOKEN)"
)


class ConfigError(Exception):
    """The saved login cannot be used or written; the message is one line with a hint."""


class Server(NamedTuple):
    """Where to connect and with what: ``url`` None when nothing is configured."""

    url: str | None
    token: str | None
    path: Path  # the client.json consulted (it may not exist)


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("RAILYARD_HOME") or Path.home() / ".railyard")


def client_config_path(state_dir: Path) -> Path:
    return state_dir / "client.json"


def read_saved(path: Path) -> tuple[str | None, str | None]:
    """The URL and token in ``path``; (None, None) when there is no file."""
    try:
        saved = json.loads(path.read_text())
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc} (hint: railyard login URL)") from None
    if not isinstance(saved, dict):
        raise ConfigError(f"cannot read {path}: not a JSON object (hint: railyard login URL)")
    url, token = saved.get("url"), saved.get("token")
    return (str(url) if url else None), (str(token) if token else None)


def resolve_server(environ: Mapping[str, str] | None = None) -> Server:
    """The one place the client decides its server: each of ``RAILYARD_URL`` and
    ``RAILYARD_TOKEN`` overrides its half of the saved login."""
    env = os.environ if environ is None else environ
    path = client_config_path(default_state_dir(env))
    url, token = env.get("RAILYARD_URL") or None, env.get("RAILYARD_TOKEN") or None
    if url is None or token is None:
        saved_url, saved_token = read_saved(path)
        url, token = url or saved_url, token or saved_token
    return Server(url, token, path)


def check_private_dir(state_dir: Path) -> None:
    """Create ``state_dir`` 0700, or accept it only as a real directory of ours that no one
    else can write into."""
    try:
        state_dir.mkdir(mode=STATE_DIR_MODE, parents=True, exist_ok=True)
        info = os.lstat(state_dir)
    except OSError as exc:
        raise ConfigError(f"{state_dir}: {exc.strerror or exc}") from None
    hint = f"hint: chmod 700 {state_dir}, or set RAILYARD_HOME to a 0700 directory of yours"
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(
            f"{state_dir} is a symbolic link; refusing to keep a token there ({hint})"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{state_dir} is not a directory ({hint})")
    if info.st_uid != os.geteuid():
        raise ConfigError(f"{state_dir} belongs to uid {info.st_uid}, not to you ({hint})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = stat.S_IMODE(info.st_mode)
        raise ConfigError(
            f"{state_dir} is writable by group or others (mode {mode:04o}); "
            f"refusing to keep a token there ({hint})"
        )


def write_login(url: str, token: str, state_dir: Path) -> Path:
    """Save ``url`` and ``token`` 0600 in ``state_dir``'s client.json, replaced atomically (a
    reader never sees half a file; a link planted at the name is replaced, not followed)."""
    check_private_dir(state_dir)
    path = client_config_path(state_dir)
    temp = state_dir / f".client.json.{os.getpid()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(temp, flags, CONFIG_FILE_MODE)
        with os.fdopen(fd, "w") as f:
            json.dump({"url": url, "token": token}, f)
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def forget_login(state_dir: Path) -> Path | None:
    """Remove the saved login; the path removed, or None when there was none."""
    path = client_config_path(state_dir)
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    return path
