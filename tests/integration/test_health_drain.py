"""A really slow node, not a mocked result: its cores are taken by busy processes, so its
matrix rate falls below its own baseline; `railyard health --drain` drains it through a real
control plane with the figure as the reason, and resumes it once the cores are free again.
A node an admin drained for another reason is never resumed by a health run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server_proc import ServerProcess

SPINNERS = 4  # busy processes on a 2-core machine: each gets well under half a core


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    state = tmp_path / "state"
    state.mkdir()
    proc = ServerProcess(state, gpus=2)
    proc.start()
    yield proc
    proc.stop()


def node_of(server: ServerProcess) -> dict[str, str]:
    [node] = server.request("GET", "/v1/nodes")
    return {"name": node["name"], "state": node["state"], "reason": node["reason"]}


def health(server: ServerProcess, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "RAILYARD_HOME": str(home),
        "RAILYARD_URL": server.url,
        "RAILYARD_TOKEN": server.token,
    }
    node = node_of(server)["name"]
    return subprocess.run(
        [sys.executable, "-m", "railyard", "health", "--checks", "compute", "--node", node,
         "--fail-below", "compute=0.6", "--warn-below", "compute=0.6", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip


def test_a_node_whose_cores_are_taken_is_drained_then_resumed(
    server: ServerProcess, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    recorded = health(server, home, "--record-baseline")
    assert recorded.returncode == 0, recorded.stderr
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(SPINNERS)
    ]
    try:
        slow = health(server, home, "--drain")
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert slow.returncode == 1, slow.stdout + slow.stderr
    drained = node_of(server)
    assert drained["state"] != "ready"
    assert drained["reason"].startswith("health: compute ")
    assert "GFLOP/s < 0.6 x expected " in drained["reason"]
    assert f"{drained['name']} drained: health: compute " in slow.stdout

    unjudged = health(server, tmp_path / "no-baseline", "--drain")  # every figure skipped
    assert unjudged.returncode == 0, unjudged.stdout + unjudged.stderr
    assert node_of(server)["state"] != "ready"  # nothing judged: nothing to resume on

    well = health(server, home, "--drain")
    assert well.returncode == 0, well.stdout + well.stderr
    assert node_of(server)["state"] == "ready"
    assert f"{drained['name']} resumed: no check failed" in well.stdout


def test_an_admins_drain_is_left_alone(server: ServerProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert health(server, home, "--record-baseline").returncode == 0
    name = node_of(server)["name"]
    server.request("POST", f"/v1/nodes/{name}/drain", json={"reason": "new NIC firmware"})
    done = health(server, home, "--drain")
    assert done.returncode == 0, done.stdout + done.stderr
    assert node_of(server)["reason"] == "new NIC firmware"
    assert node_of(server)["state"] != "ready"
