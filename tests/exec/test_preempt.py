"""The preemption handshake: checkpoint signal, then SIGTERM, then SIGKILL."""

from __future__ import annotations

from pathlib import Path

from exec_helpers import MakeExecutor, py, spec, wait_for, wait_report

from railyard.exec import Outcome

# argv[1]: a directory; the rank says it is ready, and on the signal writes a marker.
TRAP_AND_EXIT = """
import os, signal, sys, time
d = sys.argv[1]; rank = os.environ["RANK"]
def stop(signum, frame):
    open(os.path.join(d, "marker-" + rank), "w").write("checkpointed")
    sys.exit(0)
signal.signal(signal.Signals[os.environ["RAILYARD_PREEMPT_SIGNAL"]], stop)
open(os.path.join(d, "ready-" + rank), "w").close()
while True:
    time.sleep(0.1)
"""
IGNORE = """
import os, signal, sys, time
for name in sys.argv[2:]:
    signal.signal(signal.Signals[name], signal.SIG_IGN)
open(os.path.join(sys.argv[1], "ready-" + os.environ["RANK"]), "w").close()
while True:
    time.sleep(0.1)
"""


def ready(tmp_path: Path, workers: int) -> bool:
    return all((tmp_path / f"ready-{r}").exists() for r in range(workers))


def test_trapping_job_is_preempted(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor()
    executor.start(spec(tmp_path, py(TRAP_AND_EXIT, str(tmp_path)), workers=2))
    wait_for(lambda: ready(tmp_path, 2))
    executor.request_checkpoint_stop("job", grace_s=60)
    executor.request_checkpoint_stop("job", grace_s=0)  # a repeat neither resends nor hurries
    report = wait_report(executor, "job")
    assert (report.outcome, report.exit_code) == (Outcome.PREEMPTED, 0)
    assert (tmp_path / "marker-0").read_text() == (tmp_path / "marker-1").read_text()


def test_custom_preempt_signal(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor()
    job = spec(tmp_path, py(TRAP_AND_EXIT, str(tmp_path)), preempt_signal="SIGUSR2")
    executor.start(job)
    wait_for(lambda: ready(tmp_path, 1))
    executor.request_checkpoint_stop("job", grace_s=60)
    assert wait_report(executor, "job").outcome == Outcome.PREEMPTED


def test_job_ignoring_the_signal_is_terminated(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor(term_grace_s=30)
    executor.start(spec(tmp_path, py(IGNORE, str(tmp_path), "SIGUSR1")))
    wait_for(lambda: ready(tmp_path, 1))
    executor.request_checkpoint_stop("job", grace_s=0.5)
    report = wait_report(executor, "job")
    assert (report.outcome, report.exit_code, report.signal) == (Outcome.KILLED, None, "SIGTERM")


def test_job_ignoring_sigterm_too_is_killed(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor(term_grace_s=0.5)
    executor.start(spec(tmp_path, py(IGNORE, str(tmp_path), "SIGUSR1", "SIGTERM"), workers=2))
    wait_for(lambda: ready(tmp_path, 2))
    executor.request_checkpoint_stop("job", grace_s=0.5)
    report = wait_report(executor, "job")
    assert (report.outcome, report.signal) == (Outcome.KILLED, "SIGKILL")


def test_stop_for_unknown_job_is_a_no_op(make_executor: MakeExecutor) -> None:
    executor = make_executor()
    executor.request_checkpoint_stop("nobody", grace_s=1)
    executor.cancel("nobody")
    assert executor.poll() == []
