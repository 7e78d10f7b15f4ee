"""`railyard up --blueprint`: the live inventory is the blueprint's nodes, with their real
topology paths; this machine serves one of them and the rest are down until they join."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.integration.server_proc import ServerProcess


def test_up_with_a_blueprint_registers_its_nodes(tmp_path: Path) -> None:
    server = ServerProcess(
        tmp_path, gpus=None, extra=("--blueprint", "gaggle-h100", "--node-name", "dgx003")
    )
    server.start()
    try:
        nodes = {n["name"]: n for n in server.request("GET", "/v1/nodes")}
        assert len(nodes) == 12
        assert (nodes["dgx003"]["state"], nodes["dgx003"]["gpus"]) == ("ready", 8)
        assert nodes["dgx003"]["path"] == ["su0", "su0-lg0"]
        down = [n for n in nodes.values() if n["state"] == "down"]
        assert len(down) == 11
        assert {n["reason"] for n in down} == {"no live machine"}
        body = {"command": [sys.executable, "-c", "print('hi')"], "nodes": 1, "gpus_per_node": 8}
        one = server.request("POST", "/v1/jobs", json=body)[0]["id"]
        two = server.request("POST", "/v1/jobs", json={**body, "nodes": 2})[0]["id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            jobs = {j["id"]: j for j in server.request("GET", "/v1/jobs")}
            if jobs[one]["state"] == "completed" and jobs[two]["reason"]:
                break
            time.sleep(0.2)
        assert jobs[one]["state"] == "completed"
        assert jobs[one]["placement"] == {"dgx003": list(range(8))}
        assert (jobs[two]["state"], jobs[two]["reason"]) == ("pending", "ReqNodeNotAvail")
    finally:
        server.stop()


def test_a_node_name_not_in_the_blueprint_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "railyard",
        "up",
        "--blueprint",
        "gaggle-h100",
        "--node-name",
        "nope",
        "--state-dir",
        str(tmp_path / "s"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "--node-name: 'nope' is not a GPU node of gaggle-h100" in lines[0]
    assert "hint: one of dgx001" in lines[0]
    assert not (tmp_path / "s").exists()  # nothing written
