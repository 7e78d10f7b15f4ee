"""Root never acts on a path, name or byte a user chose (issue 53, items 2, 4, 5, 6, 8), from
bob's account against a root server: control bytes bob put in his command reach the admin's
terminal only escaped; an admin who holds no token does not count as the admin who stays; a
hard link to the SQLite file is not a second server on the store; bob's umask, not 0600,
rules his output files; Ray's session directory is root's alone (tests/security/
test_ray_dirs.py has the real Ray head)."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

from railyard.control.store.paths import database_path
from tests.integration.server_proc import free_port
from tests.integration.tenants import NEEDS_ROOT, Site, finished, require_railyard, submit
from tests.integration.test_up import up

pytestmark = NEEDS_ROOT

ESCAPES = "\x1b]0;PWNED\x07\x1b[2J"  # an OSC title, then clear the screen
RAILYARD = [sys.executable, "-m", "railyard"]
SRC = Path(__file__).resolve().parents[2] / "src"


def _admin_cli(site: Site, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The admin's own ``railyard`` process, as at the admin's terminal (bytes, unescaped)."""
    env = {**os.environ, "RAILYARD_URL": site.server.url, "RAILYARD_TOKEN": site.server.token}
    return subprocess.run([*RAILYARD, *args], capture_output=True, env=env, timeout=60,
                          check=False)  # fmt: skip


def _bob_cli(site: Site, args: str, umask: str) -> subprocess.CompletedProcess[str]:
    """``railyard ARGS`` from bob's shell, under ``umask``."""
    require_railyard(site)
    exports = f"PYTHONPATH={SRC} RAILYARD_URL={site.server.url} RAILYARD_TOKEN={site.bob.token}"
    railyard = f"{shlex.quote(site.python)} -m railyard"
    return site.bob.shell(f"umask {umask} && env {exports} {railyard} {args}")


# -- 53.4: terminal escapes --------------------------------------------------------------------


def test_control_bytes_in_bobs_command_reach_the_admins_terminal_escaped(site: Site) -> None:
    job_id = submit(site.server, site.bob.token, command=["/bin/echo", ESCAPES])
    finished(site.server, job_id)
    for args in (("queue", "--all", "-t", "all", "-o", "%i %o"), ("show", job_id)):
        done = _admin_cli(site, *args)
        assert done.returncode == 0, done.stderr
        for byte in (b"\x1b", b"\x07"):
            assert byte not in done.stdout + done.stderr, (args, done.stdout)
        assert b"\\e]0;PWNED\\x07\\e[2J" in done.stdout, (args, done.stdout)
    # `logs` shows the job's own output as cat would, but its header (root's) escapes bob's bytes
    done = _admin_cli(site, "logs", job_id)
    header = [line for line in done.stdout.splitlines() if line.startswith(b"==== railyard")]
    assert header, done.stdout
    assert b"\x1b" not in header[0]
    assert b"\\e]0;PWNED\\x07\\e[2J" in header[0]


# -- 53.5: the last admin who can act ----------------------------------------------------------


def test_an_admin_without_a_token_is_not_the_admin_who_stays(site: Site) -> None:
    server = site.server
    admin: str = server.request("GET", "/v1/whoami")["name"]
    tokenless = {"name": "tokenless", "is_admin": True, "unix_user": "root"}
    server.request("POST", "/v1/users", json=tokenless)
    try:
        for refused in (
            server.call("PATCH", f"/v1/users/{admin}", json={"is_admin": False}),
            server.call("DELETE", f"/v1/users/{admin}"),
        ):
            assert refused.status_code == 409, refused.text
            detail = refused.json()["detail"]
            assert detail.startswith(f"user {admin!r} is the last admin who holds a valid token")
            assert "\n" not in detail
            assert "(hint: " in detail
        # a token given, then revoked, makes no admin who can act either
        token = server.request("POST", "/v1/tokens", json={"user": "tokenless"})
        server.request("DELETE", f"/v1/tokens/{token['id']}")
        demote = server.call("PATCH", f"/v1/users/{admin}", json={"is_admin": False})
        assert demote.status_code == 409, demote.text
        assert server.call("GET", "/v1/users").status_code == 200  # still administers
    finally:
        server.call("DELETE", "/v1/users/tokenless")
    assert server.call("GET", "/v1/users").status_code == 200


# -- 53.6: one store, one server, whatever name reaches the file -------------------------------


def test_a_hard_link_to_the_database_is_not_a_second_server(site: Site, tmp_path: Path) -> None:
    database = database_path(site.server.state_dir)
    other = tmp_path / "other"
    other.mkdir()
    hard = other / "hard.db"
    os.link(database, hard)
    jobs_before = [j["id"] for j in site.server.request("GET", "/v1/jobs")]
    second = up(other / "state", free_port(), f"sqlite:///{hard}")
    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stderr.count("\n") == 1, second.stderr
    assert "is in use by another railyard server" in second.stderr
    assert not (other / "state" / "client.json").exists()
    assert [j["id"] for j in site.server.request("GET", "/v1/jobs")] == jobs_before


# -- 53.8: the submitter's umask rules the output files ----------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_bobs_umask_rules_his_output_files(site: Site) -> None:
    modes = {}
    for umask in ("0022", "0077", "0027"):
        out = site.bob.home / f"umask-{umask}.out"
        done = _bob_cli(site, f"submit --gpus 1 -o {out} -- /bin/echo hi", umask)
        assert done.returncode == 0, done.stderr
        job_id = done.stdout.split()[-1]
        assert finished(site.server, job_id)["state"] == "completed"
        modes[umask] = _mode(out)
        assert out.stat().st_uid == site.bob.account.pw_uid
    assert modes == {"0022": 0o644, "0077": 0o600, "0027": 0o640}
    # through the API without a umask: Slurm's default, 0022
    out = site.bob.home / "api.out"
    job_id = submit(site.server, site.bob.token, command=["/bin/echo", "hi"], output=str(out))
    assert finished(site.server, job_id)["state"] == "completed"
    assert _mode(out) == 0o644
