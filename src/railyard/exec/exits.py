"""Executor reports in the scheduler's terms: an `ExitReport` becomes a lifecycle `Exit`.

One mapping for every driver, so the live loop and the simulator settle the same report the
same way (`sched.lifecycle.settle`).
"""

from __future__ import annotations

from railyard.exec.protocol import ExitReport, Outcome
from railyard.sched.lifecycle import Exit, ExitKind

NODE_FAIL_SIGNAL = "NODE_FAIL"  # what an executor reports for an attempt its node took down

_KIND = {
    Outcome.COMPLETED: ExitKind.COMPLETED,
    Outcome.FAILED: ExitKind.FAILED,
    Outcome.PREEMPTED: ExitKind.PREEMPTED,
    Outcome.KILLED: ExitKind.KILLED,
    Outcome.LOST: ExitKind.LOST,
}


def exit_of(report: ExitReport, t_s: float | None = None) -> Exit:
    kind = _KIND[report.outcome]
    if report.signal == NODE_FAIL_SIGNAL:
        kind = ExitKind.NODE_FAIL
    signal = report.signal if report.signal != NODE_FAIL_SIGNAL else None
    return Exit(
        report.job_id, report.restart_count, kind, report.exit_code, signal, t_s, report.reason
    )
