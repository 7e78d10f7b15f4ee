"""A really slow node, not a mocked result: its cores are taken by busy processes, so its
matrix rate falls below its own baseline; `railyard health --report` stores the run in a real
control plane, which drains the node with the figure as the reason (or, under `railyard up
--health-fail requeue`, takes it out and requeues the job running there), and resumes it once
the cores are free again and the job starts again. A node an admin drained for another reason
is never resumed by a health run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.server_proc import ServerProcess
from tests.parts import needs
from tests.waiting import wait_for

SPINNERS = 8  # busy processes on a 2-core machine: each gets a quarter of a core at most
SPIN_UP_S = 10.0  # each spinner is seen burning CPU before the check starts


@pytest.fixture(params=["drain", "requeue"])
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    state = tmp_path / "state"
    state.mkdir()
    proc = ServerProcess(state, gpus=2, extra=("--health-fail", request.param))
    proc.start()
    yield proc
    proc.stop()


def node_of(server: ServerProcess) -> dict[str, str]:
    [node] = server.request("GET", "/v1/nodes")
    return {"name": node["name"], "state": node["state"], "reason": node["reason"]}


def job_of(server: ServerProcess, job_id: str) -> dict[str, Any]:
    found: dict[str, Any] = server.request("GET", f"/v1/jobs/{job_id}")
    return found


def _cpu_ticks(pid: int) -> int:
    """User plus system clock ticks the process has used (/proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


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


@pytest.mark.exclusive  # slows this machine on purpose and judges it (tests/conftest.py)
def test_a_node_whose_cores_are_taken_is_drained_then_resumed(
    server: ServerProcess, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    recorded = health(server, home, "--record-baseline")
    assert recorded.returncode == 0, recorded.stderr
    requeues = "requeue" in server.extra
    [job] = server.request(
        "POST", "/v1/jobs", json={"command": ["sleep", "600"], "gpus": 1, "requeue": True}
    )
    try:
        _drained_then_resumed(server, home, tmp_path, job["id"], requeues)
    finally:  # a failed check must not leave its job running past the test
        server.request("DELETE", f"/v1/jobs/{job['id']}")


def _drained_then_resumed(
    server: ServerProcess, home: Path, tmp_path: Path, job_id: str, requeues: bool
) -> None:
    job = {"id": job_id}
    wait_for(lambda: job_of(server, job["id"])["state"] == "running")
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(SPINNERS)
    ]
    try:
        # A check that started before the spinners ran measured a nearly free machine once
        # (0.81 of the baseline under four spinners): wait until every one is burning.
        wait_for(lambda: all(_cpu_ticks(p.pid) > 5 for p in spinners), SPIN_UP_S)
        slow = health(server, home, "--report")
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert slow.returncode == 1, slow.stdout + slow.stderr
    drained = node_of(server)
    assert drained["state"] == ("down" if requeues else "draining")
    assert drained["reason"].startswith("health: compute ")
    assert "GFLOP/s < 0.6 x expected " in drained["reason"]
    if requeues:
        assert f"{drained['name']} down: health: compute " in slow.stdout
        assert "1 job(s) on it requeued" in slow.stdout
        wait_for(lambda: job_of(server, job["id"])["restart_count"] == 1)
        assert job_of(server, job["id"])["state"] == "pending"
    else:
        assert f"{drained['name']} draining: health: compute " in slow.stdout
        assert job_of(server, job["id"])["state"] == "running"  # a drain lets it finish

    unjudged = health(server, tmp_path / "no-baseline", "--report")  # every figure skipped
    assert unjudged.returncode == 0, unjudged.stdout + unjudged.stderr
    assert node_of(server)["state"] != "ready"  # nothing judged: nothing to resume on

    wells = _well_again(server, home)
    assert node_of(server)["state"] == "ready"
    assert f"{drained['name']} resumed: no check failed" in wells[-1].stdout
    wait_for(lambda: job_of(server, job["id"])["state"] == "running")  # again, if requeued
    history = health(server, home, "--history")
    assert history.returncode == 0, history.stderr
    verdicts = [line.split()[1] for line in history.stdout.splitlines()[1:] if line[:1].isdigit()]
    retried = ["fail"] * (len(wells) - 1)  # newest first: the pass, then each run before it
    assert verdicts == ["pass", *retried, "skip", "fail"], history.stdout


WELL_TRIES = 4
WELL_PAUSE_S = 3.0  # between runs: a passing hog may be gone by the next


def _well_again(server: ServerProcess, home: Path) -> list[subprocess.CompletedProcess[str]]:
    """The check once the spinners are gone, run until it passes (as an operator would rerun
    it) while something else on this machine still takes a core: in CI one run right after
    they were killed measured 0.49 of the baseline. Every run, the passing one last."""
    runs: list[subprocess.CompletedProcess[str]] = []
    while len(runs) < WELL_TRIES:
        runs.append(health(server, home, "--report"))
        if runs[-1].returncode == 0:
            return runs
        time.sleep(WELL_PAUSE_S)
    said = "\n".join(r.stdout + r.stderr for r in runs)
    raise AssertionError(f"the node never measured well again in {WELL_TRIES} runs:\n{said}")


def test_an_admins_drain_is_left_alone(server: ServerProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert health(server, home, "--record-baseline").returncode == 0
    name = node_of(server)["name"]
    server.request("POST", f"/v1/nodes/{name}/drain", json={"reason": "new NIC firmware"})
    _well_again(server, home)  # a loaded machine measured 0.57 of the baseline once
    assert node_of(server)["reason"] == "new NIC firmware"
    assert node_of(server)["state"] != "ready"


@needs("kernel-log")  # gpu-xid reads it; unread, the check skips and the node is not "pass"
def test_railyard_up_runs_scheduled_checks(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    proc = ServerProcess(state, gpus=2, extra=("--health-checks", "gpu-xid", "--health-interval",
                                                "1s"))  # fmt: skip
    proc.start()
    try:
        name = node_of(proc)["name"]
        wait_for(lambda: len(proc.request("GET", f"/v1/nodes/{name}/health")) >= 2)
        [node] = proc.request("GET", "/v1/nodes")
        assert node["health"] == "pass"
        assert node["state"] == "ready"
    finally:
        proc.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--health-checks", "speed"], "up: --health-checks: unknown check 'speed' (hint: all,"),
        (["--health-interval", "1h"], "up: --health-interval needs --health-checks (hint:"),
        (["--health-checks", "all", "--health-interval", "soon"],
         "up: --health-interval: bad duration 'soon' (hint: e.g. 30d, 12h, 90m or 3600s)"),
    ],
)  # fmt: skip
def test_bad_health_flags_are_one_line_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "railyard", "up", "--state-dir", str(tmp_path), "--port", "0",
         *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"railyard: {message}")
    assert not (tmp_path / "railyard.db").exists()
