"""A rank of an attempt runs at most once: start markers claimed by the wrapper before it runs
anything, adopted by a relaunch, sealed when the attempt is reported. Real processes; the
crashes are an executor dropped without a word and its records removed, as a kill -9 of the
control plane at that point would leave them."""

from __future__ import annotations

import gc
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from exec_helpers import NODE, MakeExecutor, py, spec, wait_for, wait_report

from railyard.exec import LocalExecutor, Outcome
from railyard.exec.attempt import (
    STOOD_DOWN_EXIT,
    exit_record_path,
    read_claim,
    start_marker_path,
)
from railyard.exec.local import handle_record_path

# Append "<job> <attempt> <rank>" to argv[1], then wait for argv[2] to exist (if given).
APPEND = """
import os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(f"{os.environ['RAILYARD_JOB_ID']} {os.environ['RAILYARD_RESTART_COUNT']} "
            f"{os.environ['RANK']}\\n")
while len(sys.argv) > 2 and not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
"""


def wrapper(exit_file: Path, *command: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "railyard.exec.task.wrapper",
        "--exit-file",
        str(exit_file),
        "--",
        *command,
    ]


def test_wrappers_of_one_rank_race_and_one_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    exit_file = exit_record_path(tmp_path, 0, 0)
    command = wrapper(exit_file, "sh", "-c", f"echo ran >> {out}")
    procs = [
        subprocess.Popen(command, stderr=subprocess.PIPE, start_new_session=True) for _ in range(4)
    ]
    results = [(p.wait(timeout=60), p.stderr.read() if p.stderr else b"") for p in procs]
    assert sorted(code for code, _ in results) == [0] + [STOOD_DOWN_EXIT] * 3
    assert out.read_text() == "ran\n"
    stood_down = [err for code, err in results if code == STOOD_DOWN_EXIT]
    assert all(b"already started" in err for err in stood_down)
    claim = read_claim(start_marker_path(exit_file))
    assert claim is not None
    assert claim.pid in {p.pid for p in procs}


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_start_after_losing_the_handle_record_adopts_claimed_ranks(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """The control plane died after launching but before writing any record of the launch."""
    out, go, records = tmp_path / "out", tmp_path / "go", tmp_path / "records"
    job = spec(tmp_path, py(APPEND, str(out), str(go)), workers=2, records_dir=records)
    first = LocalExecutor(NODE)
    launched = first.start(job)
    try:
        wait_for(lambda: out.exists() and len(out.read_text().splitlines()) == 2)
        handle_record_path(records, 0).unlink()
        del first
        gc.collect()
        again = make_executor().start(job)
        assert [w.pid for w in again.workers] == [w.pid for w in launched.workers]
    finally:
        go.touch()  # every rank ends, whatever happened above
    executor = make_executor()
    executor.adopt([again])
    report = wait_report(executor, "job")
    assert (report.outcome, report.exit_code) == (Outcome.COMPLETED, 0)
    assert sorted(out.read_text().splitlines()) == ["job 0 0", "job 0 1"]


@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.parametrize("trial", range(4))
def test_relaunch_racing_a_launch_that_had_not_claimed_yet(
    make_executor: MakeExecutor, tmp_path: Path, trial: int
) -> None:
    """A wrapper of the crashed launch is still starting when the new launch starts the
    attempt again: whichever claims the rank runs it, and the executor watches that one."""
    out, records = tmp_path / "out", tmp_path / "records"
    job = spec(tmp_path, py(APPEND, str(out)), job_id=f"j{trial}", records_dir=records)
    env = {"RAILYARD_JOB_ID": f"j{trial}", "RAILYARD_RESTART_COUNT": "0", "RANK": "0"}
    stray = subprocess.Popen(
        wrapper(exit_record_path(records, 0, 0), *job.command),
        env=env,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    executor = make_executor()
    executor.start(job)
    report = wait_report(executor, f"j{trial}")
    stray.wait(timeout=60)
    assert (report.outcome, report.exit_code) == (Outcome.COMPLETED, 0)
    assert out.read_text().splitlines() == [f"j{trial} 0 0"]


def test_a_reported_attempt_is_sealed(make_executor: MakeExecutor, tmp_path: Path) -> None:
    """Once an attempt is reported, no wrapper of it runs: the one that ran holds the marker,
    and a rank that never claimed (its wrapper died starting up) was sealed by the report."""
    out, records = tmp_path / "out", tmp_path / "records"
    executor = make_executor()
    handle = executor.start(spec(tmp_path, ("true",), records_dir=records))
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    late = [*wrapper(handle.workers[0].exit_path, "sh", "-c", f"echo ran >> {out}")]
    assert subprocess.run(late, capture_output=True, check=False).returncode == STOOD_DOWN_EXIT
    dead = subprocess.Popen(["true"])
    dead.wait()
    unclaimed = replace(handle.workers[0], pid=dead.pid, exit_path=exit_record_path(records, 1, 0))
    [lost] = make_executor().adopt([replace(handle, restart_count=1, workers=(unclaimed,))])
    assert lost.outcome == Outcome.LOST
    claim = read_claim(start_marker_path(unclaimed.exit_path))
    assert claim is not None
    assert claim.sealed
    late = [*wrapper(unclaimed.exit_path, "sh", "-c", f"echo ran >> {out}")]
    assert subprocess.run(late, capture_output=True, check=False).returncode == STOOD_DOWN_EXIT
    assert not out.exists()
