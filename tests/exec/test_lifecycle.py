"""Exit outcomes, gang termination, process-group cleanup and idempotent start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from exec_helpers import MakeExecutor, py, spec, wait_for, wait_report
from tests.parts import needs

from railyard.exec import ExecutorError, Outcome
from railyard.exec.procfs import group_members
from railyard.exec.task.exitfile import read_exit

RANK0_FAILS = (
    "import os, sys, time\n"
    "if os.environ['RANK'] == '0':\n"
    "    time.sleep(0.5); sys.exit(3)\n"
    "time.sleep(300)\n"
)


def test_exit_zero_completes(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor()
    executor.start(spec(tmp_path, py("print('hello')"), workers=2))
    assert executor.running() == {"job"}
    report = wait_report(executor, "job")
    assert (report.outcome, report.exit_code, report.signal) == (Outcome.COMPLETED, 0, None)
    assert executor.running() == set()
    assert executor.poll() == []  # reported once


def test_failing_rank_fails_the_job_and_stops_the_gang(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    executor = make_executor(term_grace_s=5)
    handle = executor.start(spec(tmp_path, py(RANK0_FAILS), workers=2))
    report = wait_report(executor, "job")
    assert (report.outcome, report.exit_code) == (Outcome.FAILED, 3)
    survivor = read_exit(handle.workers[1].exit_path)
    assert survivor is not None
    assert survivor.signal == "SIGTERM"


def test_cancel_kills_the_whole_group(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor(term_grace_s=1)
    # The shell and its background sleep ignore SIGTERM, so only the SIGKILL ends them.
    handle = executor.start(spec(tmp_path, ("sh", "-c", "trap '' TERM; sleep 300 & wait")))
    pgid = handle.workers[0].pgid
    wait_for(lambda: len(group_members(pgid)) >= 3)  # wrapper, sh, sleep
    executor.cancel("job")
    executor.cancel("job")  # idempotent
    report = wait_report(executor, "job")
    assert (report.outcome, report.signal) == (Outcome.KILLED, "SIGKILL")
    # SIGKILL is delivered when the target next runs, so on a busy machine it may still show as
    # sleeping for a moment after the report; it must be gone soon, not necessarily at once.
    wait_for(lambda: group_members(pgid) == [], timeout_s=10)


@needs("tracking-cgroup")
def test_discard_ends_a_share_at_once_with_its_groups(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """A share let go with its agent (a gang that did not start on every node) is killed at
    once, SIGTERM or not, its step's groups removed, and never reported."""
    executor = make_executor(term_grace_s=300)
    handle = executor.start(spec(tmp_path, ("sh", "-c", "trap '' TERM; sleep 300 & wait")))
    pgid = handle.workers[0].pgid
    wait_for(lambda: len(group_members(pgid)) >= 3)  # wrapper, sh, sleep
    step = executor._step(handle)
    assert step is not None
    group = executor.containment.tracking.group(step)
    assert group is not None
    assert group.is_dir()
    executor.cancel("job")  # its grace (300 s) would end in a poll
    assert executor.discard("job")
    assert executor.running() == set()
    assert not group.exists()
    wait_for(lambda: group_members(pgid) == [], timeout_s=10)
    assert executor.poll() == []
    assert executor.discard("job")  # nothing left: a no-op


def test_completed_rank_leaves_no_stragglers(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor()
    marker = tmp_path / "started"
    handle = executor.start(spec(tmp_path, ("sh", "-c", f"sleep 300 & touch {marker}")))
    report = wait_report(executor, "job")
    assert report.outcome == Outcome.COMPLETED
    assert marker.exists()
    # The orphaned sleep got SIGKILL before the report; it dies when next scheduled.
    wait_for(lambda: group_members(handle.workers[0].pgid) == [], timeout_s=10)


def test_start_is_idempotent_per_attempt(make_executor: MakeExecutor, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    job = spec(tmp_path, py(f"open({str(out)!r}, 'a').write('ran\\n')"), workers=2)
    first = make_executor()
    handle = first.start(job)
    assert first.start(job) == handle
    wait_report(first, "job")
    assert first.start(job) == handle  # even after it ended
    # A new executor (a restarted control plane) finds the handle record in the log dir.
    second = make_executor()
    assert second.start(job) == handle
    assert wait_report(second, "job").outcome == Outcome.COMPLETED
    assert out.read_text() == "ran\n" * 2


def test_another_attempt_while_running_is_refused(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    executor = make_executor(term_grace_s=1)
    executor.start(spec(tmp_path, ("sleep", "300")))
    with pytest.raises(ExecutorError, match="still running"):
        executor.start(spec(tmp_path, ("sleep", "300"), restart_count=1))
    executor.cancel("job")
    wait_report(executor, "job")


def test_missing_command_fails_with_127(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor()
    executor.start(spec(tmp_path, ("/nonexistent/railyard-test",)))
    report = wait_report(executor, "job")
    assert (report.outcome, report.exit_code) == (Outcome.FAILED, 127)
    assert os.path.exists(tmp_path / "logs" / "job" / "rank-0.log")
