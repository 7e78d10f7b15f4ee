"""How a driver applies a step's plan: one order for the live loop and the simulator.

`sched.lifecycle.step` decides; a driver changes its own world to match: the live loop its
store (`control.loop.apply`, each change a compare-and-set on the row), the simulator its
in-memory jobs (`sim.driver`). Both go through :func:`apply_plan`, so what a simulation
predicts follows the same rule as what the loop does:

1. **settle** each exit: a requeue makes the job pending again, an end frees its GPUs;
2. **expire** pending jobs that can no longer end by their deadline: they never run, and
   **abandon** those whose dependency can never be met that asked so (end CANCELLED);
3. **satisfy** met dependencies: the dependency is cleared, the job waits from now;
4. **warn** running jobs near their time limit (the warning signal);
5. **stop**, each typed stop (`sched.stops`): a handshake sends the preempt signal with its
   grace (the job requeues), any other cancels now: before the starts, so a victim is
   stopping before the job it makes room for is placed;
6. **start** the cycle's starts, in the plan's order;
7. **nominate**: a job whose victims are stopping is marked, a mark no longer wanted is
   dropped (a job started this step is no longer pending: its mark goes with it);
8. **drain**: a draining node with nothing left on it is drained;
9. **accrue**: the step's decayed usage becomes the fair-share usage.

The sets a step names are disjoint (an expired job is not eligible, so not satisfied or
started), so no change depends on another's within a step: the order is the one way the
two drivers say it, not a dependency between the changes. What only one driver does (the
loop's pending reasons and accounting rows, the simulator's health checks and timers) it
does around this call.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Protocol

from railyard.sched.decisions import Start
from railyard.sched.lifecycle import Settlement, StepPlan
from railyard.sched.model import Usage
from railyard.sched.stops import Stop


class PlanTarget(Protocol):
    """A driver's world, as :func:`apply_plan` changes it."""

    @property
    def nominated(self) -> Set[str]:
        """The jobs marked nominated before this step."""
        ...

    def settle(self, settlement: Settlement) -> None: ...
    def expire(self, job_id: str) -> None: ...
    def abandon(self, job_id: str) -> None: ...
    def satisfy(self, job_id: str) -> None: ...
    def warn(self, job_id: str) -> None: ...
    def stop(self, stop: Stop) -> None: ...
    def start(self, starts: Sequence[Start]) -> Set[str]:
        """All of a step's starts at once (the loop writes them in one statement); returns
        the jobs started (the loop's start loses to a hold or a drain since its read)."""
        ...

    def nominate(self, job_id: str, nominated: bool) -> None: ...
    def drain(self, node: str) -> None: ...
    def accrue(self, usage: Usage) -> None: ...


def apply_plan(plan: StepPlan, target: PlanTarget) -> None:
    """Apply ``plan`` to ``target`` in the drivers' one order (the module's list)."""
    for settlement in plan.settled:
        target.settle(settlement)
    for job_id in plan.expired:
        target.expire(job_id)
    for job_id in plan.abandoned:
        target.abandon(job_id)
    for job_id in plan.satisfied:
        target.satisfy(job_id)
    for job_id in plan.warn:
        target.warn(job_id)
    for stop in plan.stops:
        target.stop(stop)
    result = plan.result
    before = frozenset(target.nominated)
    started = target.start(result.starts) if result.starts else frozenset()
    for job_id in sorted(result.nominated - before):
        target.nominate(job_id, True)
    for job_id in sorted(before - result.nominated - started):
        target.nominate(job_id, False)
    for name in plan.drained:
        target.drain(name)
    target.accrue(plan.usage)
