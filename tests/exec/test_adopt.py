"""A restarted control plane re-adopts running ranks and learns real exit codes."""

from __future__ import annotations

import gc
import json
import subprocess
from pathlib import Path

import pytest
from exec_helpers import NODE, MakeExecutor, logs, py, spec, wait_for, wait_report

from railyard.exec import JobHandle, LocalExecutor, Outcome, WorkerHandle
from railyard.exec.procfs import is_alive, start_time_ticks

# Exit 3 once argv[1]/go exists; the preempt signal makes it exit 0 instead.
WAIT_FOR_GO = """
import os, signal, sys, time
d = sys.argv[1]
signal.signal(signal.SIGUSR1, lambda s, f: sys.exit(0))
open(os.path.join(d, "ready-" + os.environ["RANK"]), "w").close()
while not os.path.exists(os.path.join(d, "go")):
    time.sleep(0.05)
sys.exit(3)
"""


def crash_after_start(tmp_path: Path, workers: int = 2) -> JobHandle:
    """Start a job, keep only its persisted handle, and drop the executor without a word."""
    executor = LocalExecutor(NODE)
    handle = executor.start(spec(tmp_path, py(WAIT_FOR_GO, str(tmp_path)), workers=workers))
    wait_for(lambda: all((tmp_path / f"ready-{r}").exists() for r in range(workers)))
    persisted = json.dumps(handle.to_dict())
    del executor, handle
    gc.collect()  # Popen finalizers must leave the processes running
    return JobHandle.from_dict(json.loads(persisted))


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_adopted_job_reports_its_real_exit_code(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    handle = crash_after_start(tmp_path)
    assert all(is_alive(w.pid, w.start_time_ticks) for w in handle.workers)
    executor = make_executor()
    assert executor.adopt([handle]) == []
    assert executor.adopt([handle]) == []  # idempotent
    assert executor.running() == {"job"}
    (tmp_path / "go").touch()
    report = wait_report(executor, "job")
    assert (report.outcome, report.exit_code) == (Outcome.FAILED, 3)


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_adopted_job_can_be_preempted(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor()
    executor.adopt([crash_after_start(tmp_path)])
    executor.request_checkpoint_stop("job", grace_s=60)
    assert wait_report(executor, "job").outcome == Outcome.PREEMPTED


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_job_that_ended_while_away_is_reported_on_adoption(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    handle = crash_after_start(tmp_path, workers=1)
    (tmp_path / "go").touch()
    wait_for(handle.workers[0].exit_path.exists)
    wait_for(lambda: not is_alive(handle.workers[0].pid, handle.workers[0].start_time_ticks))
    [report] = make_executor().adopt([handle])
    assert (report.outcome, report.exit_code) == (Outcome.FAILED, 3)


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_start_after_a_crash_adopts_instead_of_relaunching(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    # The control plane crashed after start() but before it stored the handle: it starts the
    # same attempt again, and the executor finds the handle record in the log dir.
    handle = crash_after_start(tmp_path)
    executor = make_executor()
    job = spec(tmp_path, py(WAIT_FOR_GO, str(tmp_path)), workers=2)
    assert executor.start(job) == handle
    assert logs(tmp_path).count("==== railyard") == 2  # one header per rank: no relaunch
    (tmp_path / "go").touch()
    assert wait_report(executor, "job").exit_code == 3


def fake_handle(job_id: str, pid: int, start: int, tmp_path: Path) -> JobHandle:
    worker = WorkerHandle(
        job_id=job_id,
        rank=0,
        node=NODE,
        pid=pid,
        pgid=pid,
        start_time_ticks=start,
        log_path=tmp_path / f"{job_id}.log",
        exit_path=tmp_path / f"{job_id}.exit.json",
    )
    return JobHandle(job_id=job_id, restart_count=0, workers=(worker,), master_port=1)


def test_vanished_or_reused_pids_are_lost(make_executor: MakeExecutor, tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        reused = start_time_ticks(stranger.pid) + 1  # same pid, another process
        reports = make_executor().adopt(
            [
                fake_handle("gone", gone.pid, 1, tmp_path),
                fake_handle("reused", stranger.pid, reused, tmp_path),
            ]
        )
        assert {(r.job_id, r.outcome, r.exit_code) for r in reports} == {
            ("gone", Outcome.LOST, None),
            ("reused", Outcome.LOST, None),
        }
        assert stranger.poll() is None  # a process that is not ours is never signalled
    finally:
        stranger.kill()
        stranger.wait()
