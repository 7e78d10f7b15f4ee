"""The Ray cluster's token: where it lives, making it, and asking a cluster whether it needs one.

Ray's token authentication (``RAY_AUTH_MODE=token``, Ray 2.5x+) makes the GCS and raylets refuse
any gRPC call without the cluster's token, so a process that reaches a Ray port can no longer run
code as the user Ray runs as (root on a railyard head). The token is read from ``RAY_AUTH_TOKEN``,
else the file ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``: :func:`token_file` follows the
same order. Whether a cluster has authentication on is asked of its GCS itself
(:func:`probe`): a call without a token is either answered (off) or refused (on); Ray has no
other reliable way to tell a client, and a client with a token is answered either way.
"""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
PATH_ENV = "RAY_AUTH_TOKEN_PATH"
PROBE_TIMEOUT_S = (
    60.0  # a GCS that accepts TCP but never answers: Ray's own client gives up at 40 s
)
TOKEN_HINT = (
    "copy the head's token file (railyard join --head prints where) to the same path here, "
    f"mode 0600, or set {PATH_ENV} or {TOKEN_ENV}"
)


class TokenError(Exception):
    """The token cannot be used or made; one line with a hint."""


def token_file(env: Mapping[str, str]) -> Path:
    """Where Ray reads the token file: ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``."""
    if env.get(PATH_ENV):
        return Path(env[PATH_ENV])
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".ray" / "auth_token"


def find_token(env: Mapping[str, str]) -> str | None:
    """Where this process's token comes from (the variable or the file), None when there is
    none; a token file others can read is refused, since whoever reads it runs code as root."""
    if env.get(TOKEN_ENV, "").strip():
        return TOKEN_ENV
    path = token_file(env)
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TokenError(f"{path}: {exc.strerror} (hint: {TOKEN_HINT})") from None
    if not stat.S_ISREG(info.st_mode):
        raise TokenError(f"{path}: not a regular file (hint: {TOKEN_HINT})")
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise TokenError(
            f"{path}: the Ray token file is readable by others (mode {mode:04o}) "
            f"(hint: chmod 600 {path})"
        )
    if info.st_size == 0:
        raise TokenError(f"{path}: the Ray token file is empty (hint: {TOKEN_HINT})")
    return str(path)


def make_token(path: Path) -> None:
    """Write a new 256-bit token (Ray's own format: 64 hex digits) to ``path``, mode 0600,
    created exclusively so an existing file, or a link planted there, is never written through."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise TokenError(f"{path}: cannot create the Ray token file: {exc.strerror}") from None
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))
        out.flush()
        os.fsync(out.fileno())


# Run in a child process with RAY_AUTH_MODE=disabled, so the first call carries no token
# whatever this process has; then with token auth switched on (Ray's own _enable_token_auth)
# to say whether this machine's token is accepted. Prints one line: MODE ADDRESS [TOKEN].
_PROBE = """
import socket, sys
try:
    from ray._private.services import canonicalize_bootstrap_address_or_die
    from ray._private.authentication.authentication_token_setup import _enable_token_auth
    from ray._raylet import AuthenticationTokenLoader, GcsClient
    from ray.exceptions import AuthenticationError
    address = canonicalize_bootstrap_address_or_die(sys.argv[1])
    host, _, port = address.rpartition(":")
    socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    def answered():
        try:
            GcsClient(address=address)
        except AuthenticationError:
            return False
        return True
    if answered():
        print("disabled", address)
        sys.exit()
    loader = AuthenticationTokenLoader.instance()
    if not loader.has_token(ignore_auth_mode=True):
        print("token", address, "missing")
        sys.exit()
    _enable_token_auth()
    loader.reset_cache()
    print("token", address, "accepted" if answered() else "refused")
except BaseException as exc:
    if isinstance(exc, SystemExit):
        raise
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    print("unreachable", "-", text)
"""


class Probe(NamedTuple):
    """What a cluster's GCS said: ``mode`` is ``token`` or ``disabled``; ``token`` says whether
    this machine's token was ``accepted``, ``refused`` or ``missing`` (``token`` mode only)."""

    mode: str
    address: str
    token: str = ""


class ProbeFailed(Exception):
    """No Ray cluster answered at the address; one line."""


def probe(address: str, env: Mapping[str, str] | None = None) -> Probe:
    """Ask the GCS at ``address`` (or ``auto``) whether it requires a token, and whether it
    takes the token this machine has. Runs Ray in a child process: the mode is process-wide."""
    child = dict(os.environ if env is None else env)
    child[MODE_ENV] = "disabled"
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, address],
            env=child,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ProbeFailed(f"no answer from its GCS in {PROBE_TIMEOUT_S:.0f} s") from None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    words = lines[-1].split(" ", 2) if lines else []
    if len(words) >= 2 and words[0] in ("token", "disabled"):
        return Probe(words[0], words[1], words[2] if len(words) > 2 else "")
    if len(words) == 3 and words[0] == "unreachable":
        raise ProbeFailed(words[2])
    last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    raise ProbeFailed(f"the Ray probe failed: {last}")
