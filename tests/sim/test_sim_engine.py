"""The event core and the virtual executor's protocol behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

from railyard.exec.protocol import Executor, LaunchSpec, Outcome
from railyard.sim.checkpoints import Attempt, CheckpointPolicy, IntervalRule
from railyard.sim.engine import Engine, Event, EventKind
from railyard.sim.executor import VirtualExecutor
from railyard.sim.workload import FinalState


def test_events_run_by_time_then_priority_then_arrival() -> None:
    engine = Engine()
    seen: list[tuple[float, str]] = []
    engine.schedule(5.0, Event(EventKind.CYCLE))
    engine.schedule(5.0, Event(EventKind.SUBMIT, "b"))
    engine.schedule(5.0, Event(EventKind.FINISH, "a"))
    engine.schedule(5.0, Event(EventKind.SUBMIT, "c"))
    engine.schedule(1.0, Event(EventKind.SUBMIT, "first"))
    engine.run(lambda t, ev: seen.append((t, ev.job_id or ev.kind.name)))
    assert seen == [(1.0, "first"), (5.0, "a"), (5.0, "b"), (5.0, "c"), (5.0, "CYCLE")]
    with pytest.raises(ValueError, match="before now"):
        engine.schedule(4.0, Event(EventKind.SUBMIT, "late"))


def spec(job_id: str, restart: int = 0) -> LaunchSpec:
    return LaunchSpec(
        job_id=job_id,
        command=("x",),
        placement={"n0": (0, 1)},
        gpus_per_worker=2,
        workers=1,
        restart_count=restart,
        log_dir=Path("/none"),
        checkpoint_dir=Path("/none"),
    )


def test_virtual_executor_speaks_the_protocol() -> None:
    engine = Engine()
    ex: Executor = VirtualExecutor(engine, CheckpointPolicy(rule=IntervalRule.NONE))
    assert isinstance(ex, VirtualExecutor)
    ex.register("a", 100.0, 2, FinalState.COMPLETED)
    ex.register("b", 100.0, 2, FinalState.FAILED)
    handle = ex.start(spec("a"))
    assert ex.start(spec("a")) == handle  # idempotent per attempt
    ex.start(spec("b"))
    assert ex.running() == {"a", "b"}
    assert ex.adopt([handle]) == []
    engine.run(lambda t, e: ex.on_event(e))
    reports = {r.job_id: r for r in ex.poll()}
    assert reports["a"].outcome is Outcome.COMPLETED
    assert reports["a"].exit_code == 0
    assert reports["b"].outcome is Outcome.FAILED
    assert ex.poll() == []
    assert ex.running() == set()


def test_cancel_reports_killed_and_repeat_stop_requests_do_nothing() -> None:
    engine = Engine()
    ex = VirtualExecutor(engine, CheckpointPolicy(rule=IntervalRule.FIXED, interval_s=10))
    ex.register("a", 100.0, 2, FinalState.COMPLETED)
    ex.start(spec("a"))
    ex.request_checkpoint_stop("a", 30.0)
    ex.request_checkpoint_stop("a", 0.0)  # neither resends nor moves the deadline
    ex.cancel("a")
    [report] = ex.poll()
    assert report.outcome is Outcome.KILLED


def test_attempt_arithmetic() -> None:
    a = Attempt(start_t_s=10, overhead_s=5, work_s=250, interval_s=100, cost_s=10)
    assert a.checkpoints == 2
    assert a.end_t_s == 10 + 5 + 250 + 20
    assert a.saved_at(15 + 109) == (0, 0.0)
    assert a.saved_at(15 + 110) == (1, 100.0)
    assert a.progress_at(15 + 105) == 100.0  # writing the first checkpoint
    assert a.stop_on_signal(15 + 50, grace_s=10) == (15 + 60, 50.0)
    assert a.stop_on_signal(15 + 50, grace_s=9) is None
    assert a.stop_on_signal(15 + 105, grace_s=5) == (15 + 110, 100.0)  # finish the write


def test_young_interval_from_the_twin() -> None:
    p = CheckpointPolicy(rule=IntervalRule.YOUNG, cost_s=60)
    # sqrt(2 C M): 1,024 GPUs at ~2.0e-5 failures per GPU-hour -> MTBF ~ 49.5 h
    assert p.interval_for(1024) == pytest.approx(
        (2 * 60 * 3600 / (1024 * 419 / (54 * 24 * 16384))) ** 0.5
    )
    assert p.interval_for(8) > p.interval_for(1024)
