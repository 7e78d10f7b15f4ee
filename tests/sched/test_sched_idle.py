"""Idle limits (issue 23): an interactive job whose user sent it nothing for its queue's
`idle_limit_s` is stopped (reason `IdleLimit`, ends TIMEOUT); a batch job never is, and any
activity pushes the deadline out."""

from __future__ import annotations

import math
from dataclasses import replace

from sched_fakes import flat_queues, job, nodes, running

from railyard.sched import SchedulerConfig, StopCause
from railyard.sched.lifecycle import (
    EndState,
    Exit,
    ExitKind,
    StepInput,
    idle_deadline_t_s,
    settle,
    step,
)
from railyard.sched.stops import Stop

QUEUES = [replace(q, idle_limit_s=600.0) if q.name == "a" else q for q in flat_queues({"a": 16})]


def _step(run: list, now_t_s: float, queues=QUEUES):  # type: ignore[no-untyped-def]
    return step(StepInput(nodes(2), queues, [], run, [], now_t_s), SchedulerConfig())


def test_an_idle_session_is_stopped_and_a_batch_job_or_a_busy_session_is_not() -> None:
    idle = running(job("idle", interactive=True), "n0:0", start_t_s=0.0, active_t_s=100.0)
    busy = running(job("busy", interactive=True), "n0:1", start_t_s=0.0, active_t_s=650.0)
    batch = running(job("batch"), "n0:2", start_t_s=0.0)
    plan = _step([idle, busy, batch], 700.0)
    assert plan.stops == (Stop("idle", StopCause.IDLE_LIMIT, "IdleLimit"),)
    assert plan.next_deadline_t_s == 650.0 + 600.0  # the busy one's, since it was last used
    assert _step([idle], 699.0).stops == ()  # 599 s unused: not yet
    assert _step([idle], 699.0).next_deadline_t_s == 700.0


def test_without_activity_the_limit_runs_from_the_start_and_a_queue_without_one_never_stops() -> (
    None
):
    fresh = running(job("s", interactive=True), "n0:0", start_t_s=50.0)
    assert idle_deadline_t_s(fresh, QUEUES[1]) == 650.0
    assert _step([fresh], 650.0).stops[0].cause is StopCause.IDLE_LIMIT
    assert _step([fresh], 10_000.0, flat_queues({"a": 16})).stops == ()
    assert idle_deadline_t_s(fresh, flat_queues({"a": 16})[1]) == math.inf


def test_an_idle_stop_ends_the_job_timeout_with_its_reason() -> None:
    run = running(job("s", interactive=True), "n0:0", stop_cause=StopCause.IDLE_LIMIT)
    s = settle(run, Exit("s", 0, ExitKind.KILLED, signal="SIGKILL"), 700.0)
    assert (s.end, s.reason, s.requeued) == (EndState.TIMEOUT, "IdleLimit", None)


def test_a_session_started_now_wakes_the_driver_by_its_idle_limit() -> None:
    plan = step(
        StepInput(nodes(1), QUEUES, [job("s", interactive=True)], [], [], 100.0),
        SchedulerConfig(),
    )
    assert plan.result.started_ids == {"s"}
    assert plan.next_deadline_t_s == 700.0
