"""How long the loop lets events gather before it steps: a request (a submit) leaves the API
at least the last step's time, while an exit alone, which leaves GPUs idle, waits only the
short exit window. Checked on the waits the loop asks of its stop event, with the loop's
stopwatch moved only by what each fake step says it took (a real clock on a loaded machine
made a 0 s step take 20 ms, over the 10 ms window)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from railyard.control.loop import service
from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store, sqlite_url
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.engine import Engine
from railyard.sim.executor import VirtualExecutor

STEP_S = 0.3  # what each fake step takes; far above both windows


class Exits(VirtualExecutor):
    """A virtual executor that also says when a job exits (`NotifiesExits`)."""

    def on_exit(self, callback: Callable[[], None]) -> None:
        self.exited = callback


class Stop(threading.Event):
    """Records every wait the loop asks for; ends the loop after ``rounds`` of them."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.rounds = rounds

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        if len(self.waits) >= self.rounds:
            self.set()
        return self.is_set()


def _waits(
    tmp_path: Path, event: str, monkeypatch: pytest.MonkeyPatch, step_s: float = STEP_S
) -> list[float]:
    tmp_path.mkdir(exist_ok=True)
    elapsed_s = 0.0  # the loop's perf_counter: only the fake steps move it
    monkeypatch.setattr(
        service, "time", SimpleNamespace(perf_counter=lambda: elapsed_s, time=time.time)
    )
    store = Store(sqlite_url(tmp_path / "railyard.db"))
    executor = Exits(Engine(), CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0))
    config = LoopConfig(state_dir=tmp_path, cycle_interval_s=600.0)
    loop = Loop(store, executor, config)
    steps = 0

    def step() -> None:
        nonlocal steps, elapsed_s
        steps += 1
        elapsed_s += step_s
        if steps == 1:  # an event arrives while the first step runs
            {"exit": executor.exited, "request": loop.wake, "prompt": loop.wake_prompt}[event]()

    loop.step_or_report = step  # type: ignore[method-assign,assignment]
    stop = Stop(rounds=1)
    loop.run(stop)
    store.close()
    return stop.waits


def test_an_exit_alone_waits_only_the_exit_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _waits(tmp_path, "exit", monkeypatch) == [LoopConfig(state_dir=tmp_path).exit_coalesce_s]


def test_a_request_leaves_the_api_the_last_steps_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (wait,) = _waits(tmp_path, "request", monkeypatch)
    assert wait >= STEP_S


def test_an_interactive_submit_waits_the_exit_window_unless_steps_are_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone waits at a terminal (`railyard run`): no 50 ms request window on a quiet
    loop, but under load the last step's time still goes to the API first."""
    config = LoopConfig(state_dir=tmp_path)
    assert _waits(tmp_path / "quick", "prompt", monkeypatch, step_s=0.0) == [config.exit_coalesce_s]
    assert _waits(tmp_path / "request", "request", monkeypatch, step_s=0.0) == [
        config.event_coalesce_s
    ]
    (wait,) = _waits(tmp_path / "slow", "prompt", monkeypatch)
    assert wait >= STEP_S


def test_the_running_loop_leaves_start_up_objects_out_of_full_collections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the process held when the loop started is frozen (`gc.freeze`), so a full
    collection in a step scans only what came later."""
    gc.unfreeze()
    try:
        _waits(tmp_path, "exit", monkeypatch)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_loop_sleeps_only_until_the_next_warning_or_limit_falls_due(tmp_path: Path) -> None:
    """A `--signal=USR1@60` warning lands when due, not up to an interval later: with nothing
    to wake it, the loop sleeps until the last plan's next deadline (never below a floor,
    never past the interval); after a failed step, the whole interval."""
    from railyard.control.loop.service import MIN_SLEEP_S, StepReport
    from railyard.sched import Usage
    from railyard.sched.decisions import CycleResult
    from railyard.sched.lifecycle import StepPlan

    store = Store(sqlite_url(tmp_path / "railyard.db"))
    executor = Exits(Engine(), CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0))
    now = 1000.0
    loop = Loop(store, executor, LoopConfig(state_dir=tmp_path, cycle_interval_s=2.0),
                clock=lambda: now)  # fmt: skip

    def plan(due_t_s: float) -> StepPlan:
        return StepPlan((), (), (), CycleResult(), {}, (), Usage(), next_deadline_t_s=due_t_s)

    assert loop._until_due_s() == 2.0  # no plan yet
    for due, expected in ((now + 0.25, 0.25), (now + 30, 2.0), (now - 5, MIN_SLEEP_S)):
        loop.last_plan = plan(due)
        assert loop._until_due_s() == expected

    waits: list[float] = []
    stop = threading.Event()

    class Wake(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            if len(waits) == 2:
                stop.set()
            return False

    outcomes = iter([StepReport(), None])
    loop.last_plan = plan(now + 0.25)
    loop._wake = Wake()
    loop.step_or_report = lambda: next(outcomes)  # type: ignore[method-assign]
    loop.run(stop)
    store.close()
    assert waits == [0.25, 2.0]
