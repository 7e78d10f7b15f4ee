"""Campaign attacks of issue 53 (items 2, 4, 5, 6, 8) for ``benchmarks/attack_campaign.py``:
bob's control bytes at the admin's terminal, a lockout through an admin who holds no token, a
second server through a hard link to the SQLite file, output files that ignore bob's umask,
and a symlink planted in Ray's session directory (``RAY_ATTACKS``: needs Ray, like the
campaign's ``--ray``). The same attacks, one per test, are ``tests/security/test_root_paths.py``
and ``tests/security/test_ray_dirs.py``.

Each function takes the campaign's :class:`Site` and returns (what happened, held?).
Standalone, as root: ``python benchmarks/attacks_rootpaths.py [--ray]`` runs them against a
site of its own and prints one line each (exit 1 if one broke).
"""

from __future__ import annotations

import argparse
import os
import shlex
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.server_proc import free_port
from tests.integration.tenants import Site, finished, shared_site, submit

from railyard.control.store.paths import database_path

Attack = Callable[[Site], tuple[str, bool]]
RAILYARD = [sys.executable, "-m", "railyard"]
SRC = Path(__file__).resolve().parents[1] / "src"
ESCAPES = "\x1b]0;PWNED\x07\x1b[2J"


def _admin_cli(site: Site, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "RAILYARD_URL": site.server.url, "RAILYARD_TOKEN": site.server.token}
    return subprocess.run([*RAILYARD, *args], capture_output=True, env=env, timeout=60,
                          check=False)  # fmt: skip


def terminal_escapes(site: Site) -> tuple[str, bool]:
    """bob's command is an OSC title and a clear-screen; the admin lists and shows it."""
    job_id = submit(site.server, site.bob.token, command=["/bin/echo", ESCAPES])
    finished(site.server, job_id)
    raw = []
    for args in (("queue", "--all", "-t", "all", "-o", "%i %o"), ("show", job_id)):
        done = _admin_cli(site, *args)
        if b"\x1b" in done.stdout or b"\x07" in done.stdout:
            raw.append(args[0])
    if raw:
        return f"ESC/BEL reached the admin's terminal raw through {', '.join(raw)}", False
    return "queue -o %o and show print \\e]0;PWNED\\x07\\e[2J", True


def tokenless_admin_lockout(site: Site) -> tuple[str, bool]:
    """A second admin without a token; the only admin with one demotes itself."""
    server = site.server
    admin: str = server.request("GET", "/v1/whoami")["name"]
    tokenless = {"name": "tokenless", "is_admin": True, "unix_user": "root"}
    server.request("POST", "/v1/users", json=tokenless)
    try:
        demote = server.call("PATCH", f"/v1/users/{admin}", json={"is_admin": False})
        said = f"{demote.status_code} {demote.json().get('detail', '')}"[:90]
        return said, demote.status_code == 409
    finally:
        if server.call("GET", "/v1/users").status_code == 200:
            server.call("DELETE", "/v1/users/tokenless")


def hard_link_second_server(site: Site) -> tuple[str, bool]:
    """`ln railyard.db other/hard.db`, then `up --database-url sqlite:///other/hard.db`."""
    with tempfile.TemporaryDirectory() as tmp:
        hard = Path(tmp) / "hard.db"
        os.link(database_path(site.server.state_dir), hard)
        state = Path(tmp) / "state"
        cmd = [*RAILYARD, "up", "--gpus", "1", "--state-dir", str(state), "--port",
               str(free_port()), "--database-url", f"sqlite:///{hard}"]  # fmt: skip
        env = {**os.environ, "RAILYARD_HOME": str(state)}
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60,
                                  check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            return "a second server came up on the same store", False
        line = (done.stderr.strip().splitlines() or [""])[-1]
        return f"exit {done.returncode}: {line[:80]}", done.returncode == 2


def umask_rules_outputs(site: Site) -> tuple[str, bool]:
    """bob submits from his shell under umask 022 and 077: his outputs get 0644 and 0600."""
    modes = {}
    exports = f"PYTHONPATH={SRC} RAILYARD_URL={site.server.url} RAILYARD_TOKEN={site.bob.token}"
    for umask in ("022", "077"):
        out = site.bob.home / f"campaign-umask-{umask}.out"
        cli = f"{shlex.quote(site.python)} -m railyard submit --gpus 1 -o {out} -- /bin/true"
        done = site.bob.shell(f"umask {umask} && env {exports} {cli}")
        if done.returncode != 0:
            return f"submit failed: {done.stderr.strip()[-70:]}", False
        finished(site.server, done.stdout.split()[-1])
        modes[umask] = f"{stat.S_IMODE(out.stat().st_mode):04o}"
    said = ", ".join(f"umask {u}: {m}" for u, m in modes.items())
    return said, modes == {"022": "0644", "077": "0600"}


def ray_session_symlink(site: Site) -> tuple[str, bool]:
    """`railyard join --head` with Ray's base where bob can reach it (a 0755 scratch, as
    /tmp); bob plants a link named like the next driver log in the session's logs."""
    from tests.security import test_ray_token as rt  # Ray is an optional extra

    scratch = rt.Scratch()
    os.chmod(scratch.root, 0o755)
    try:
        port = free_port()
        argv = [*rt.RAILYARD, "join", "--head", "--bind", "127.0.0.1", "--port", str(port)]
        argv += ["--node-name", "head", "--gpus", "0", "--ray-start-args", rt.ray_ports(port)]
        done = scratch.run(argv, scratch.env(scratch.home("head")))
        if done.returncode != 0:
            return f"head did not start: {done.stderr.strip()[-70:]}", False
        planted = (
            scratch.root / "rt" / "ray" / "session_latest" / "logs" / "python-core-driver-x.log"
        )
        attack = f"ln -s /etc/shadow {shlex.quote(str(planted))}"
        tried = site.bob.shell(attack)
        if tried.returncode == 0:
            return "bob planted a link in Ray's session logs", False
        return f"refused: {tried.stderr.strip()[-70:]}", not planted.is_symlink()
    finally:
        scratch.close()


ATTACKS: list[tuple[str, str, Attack]] = [
    ("bob's command $'\\e]0;PWNED\\a\\e[2J' in the admin's queue -o %o and show",
     "shown escaped, no ESC/BEL byte", terminal_escapes),
    ("a tokenless second admin, then the only admin with a token demotes itself",
     "409, the admin stays", tokenless_admin_lockout),
    ("up --database-url sqlite:///hard-link-of-railyard.db beside the server",
     "exit 2, in use", hard_link_second_server),
    ("bob's umask 022 / 077 on his --output files", "0644 / 0600", umask_rules_outputs),
]  # fmt: skip
RAY_ATTACKS: list[tuple[str, str, Attack]] = [
    ("a symlink planted in Ray's session logs (python-core-driver-*.log)",
     "permission denied: the base is 0700", ray_session_symlink),
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ray", action="store_true", help="also the Ray head attack")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("attacks_rootpaths: run as root (it creates two Unix users)")
    broke = 0
    with tempfile.TemporaryDirectory() as tmp, shared_site(Path(tmp)) as site:
        for name, expected, fn in ATTACKS + (RAY_ATTACKS if args.ray else []):
            started = time.monotonic()
            result, held = fn(site)
            broke += not held
            took_s = time.monotonic() - started
            print(f"{'held' if held else 'BROKE':>5}  {name} ({expected}): {result} "
                  f"[{took_s:.1f} s]", flush=True)  # fmt: skip
    sys.exit(1 if broke else 0)


if __name__ == "__main__":
    main()
