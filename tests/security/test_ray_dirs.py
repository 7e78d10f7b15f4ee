"""Ray's session directories are root's alone (issue 53, item 2), against a real head.

Ray makes its temp directory and each session's directories 0777 without the sticky bit. With
Ray run as root, bob could plant a symlink named like the next log file a driver opens (a
restarted `railyard up --ray` appends its ``python-core-driver-*.log`` through it, into any
file root can write). `railyard join --head` must keep Ray's temp directory inside a 0700
base of root's, so bob cannot even reach the session directory. A real `ray start` on
loopback, its base where bob can reach it (a 0755 scratch in /tmp, as /tmp is), bob's own
shell for the attack; the head is stopped by its own process group.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from collections.abc import Iterator

import pytest

from tests.integration.server_proc import free_port
from tests.integration.tenants import NEEDS_ROOT, unix_accounts
from tests.parts import require
from tests.security.test_ray_token import RAILYARD, Scratch, ray_ports

require("ray")

pytestmark = [*NEEDS_ROOT, pytest.mark.long, pytest.mark.slow, pytest.mark.heavy]


@pytest.fixture(scope="module")
def scratch() -> Iterator[Scratch]:
    made = Scratch()
    os.chmod(made.root, 0o755)  # bob can reach it, as he can reach /tmp
    try:
        yield made
    finally:
        made.close()


def test_bob_cannot_plant_a_link_where_ray_writes_as_root(scratch: Scratch) -> None:
    port = free_port()
    env = scratch.env(scratch.home("head"))  # RAY_TMPDIR: <scratch>/rt, not made yet
    done = scratch.run(
        [*RAILYARD, "join", "--head", "--bind", "127.0.0.1", "--port", str(port),
         "--node-name", "head", "--gpus", "0", "--ray-start-args", ray_ports(port)],
        env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    base = scratch.root / "rt"
    logs = base / "ray" / "session_latest" / "logs"
    assert logs.is_dir()  # Ray's session is there, as root made it
    target = scratch.root / "root-only"
    target.write_text("")
    target.chmod(0o600)
    planted = logs / f"python-core-driver-{'0' * 56}_4242.log"
    with unix_accounts(1) as (bob,):
        attack = f"ln -s {shlex.quote(str(target))} {shlex.quote(str(planted))}"
        tried = subprocess.run(["runuser", "-u", bob.pw_name, "--", "bash", "-c", attack],
                               capture_output=True, text=True, check=False)  # fmt: skip
    assert tried.returncode != 0, "bob planted a link in Ray's session logs"
    assert "Permission denied" in tried.stderr
    assert not planted.is_symlink()
    assert stat.S_IMODE(base.stat().st_mode) == 0o700
