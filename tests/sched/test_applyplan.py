"""`sched.applyplan`: the one order in which the live loop and the simulator apply a plan."""

from __future__ import annotations

from collections.abc import Sequence

from railyard.sched import StopCause, Usage
from railyard.sched.applyplan import apply_plan
from railyard.sched.decisions import CycleResult, Start
from railyard.sched.lifecycle import EndState, Settlement, StepPlan
from railyard.sched.stops import Stop


class Recorder:
    """A driver that notes each change; ``refused`` starts lose their race (the loop's)."""

    def __init__(self, nominated: set[str], refused: frozenset[str] = frozenset()) -> None:
        self.nominated = nominated
        self.refused = refused
        self.calls: list[tuple[str, object]] = []

    def settle(self, settlement: Settlement) -> None:
        self.calls.append(("settle", settlement.job_id))

    def expire(self, job_id: str) -> None:
        self.calls.append(("expire", job_id))

    def abandon(self, job_id: str) -> None:
        self.calls.append(("abandon", job_id))

    def satisfy(self, job_id: str) -> None:
        self.calls.append(("satisfy", job_id))

    def warn(self, job_id: str) -> None:
        self.calls.append(("warn", job_id))

    def stop(self, stop: Stop) -> None:
        self.calls.append(("stop", stop.job_id))

    def start(self, starts: Sequence[Start]) -> set[str]:
        self.calls.append(("start", tuple(s.job_id for s in starts)))
        return {s.job_id for s in starts} - self.refused

    def nominate(self, job_id: str, nominated: bool) -> None:
        self.calls.append(("nominate", (job_id, nominated)))

    def drain(self, node: str) -> None:
        self.calls.append(("drain", node))

    def accrue(self, usage: Usage) -> None:
        self.calls.append(("accrue", dict(usage.queue_gpu_s)))


def _plan(nominated: frozenset[str]) -> StepPlan:
    starts = (Start("s1", {"n1": (0,)}), Start("s2", {"n1": (1,)}))
    return StepPlan(
        settled=(Settlement("e1", "done", end=EndState.COMPLETED),),
        warn=("w1",),
        stop=(),
        result=CycleResult(starts=starts, nominated=nominated),
        held={},
        drained=("n9",),
        usage=Usage({"q": 5.0}),
        expired=("x1",),
        stops=(Stop("v1", StopCause.PREEMPTED, "for s9", grace_s=30.0),),
        satisfied=("d1",),
        abandoned=("k1",),
    )


def test_changes_come_in_the_drivers_one_order() -> None:
    target = Recorder(nominated=set())
    apply_plan(_plan(frozenset({"p1"})), target)
    assert target.calls == [
        ("settle", "e1"), ("expire", "x1"), ("abandon", "k1"), ("satisfy", "d1"), ("warn", "w1"),
        ("stop", "v1"), ("start", ("s1", "s2")), ("nominate", ("p1", True)), ("drain", "n9"),
        ("accrue", {"q": 5.0}),
    ]  # fmt: skip


def test_a_mark_no_longer_wanted_is_dropped_unless_its_job_started() -> None:
    """s1 started (its mark leaves with it); s2's start lost its race, so its mark is dropped
    like old's; keep stays marked and is not written again."""
    target = Recorder(nominated={"s1", "s2", "old", "keep"}, refused=frozenset({"s2"}))
    apply_plan(_plan(frozenset({"keep", "new"})), target)
    marks = [args for name, args in target.calls if name == "nominate"]
    assert marks == [("new", True), ("old", False), ("s2", False)]
