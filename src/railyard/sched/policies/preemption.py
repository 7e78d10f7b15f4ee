"""Preemption policies: who may be evicted for whom (the cycle picks the cheapest set).

`on`: reclaim (any job of a queue branch that borrows, when the preemptor's branch is under
its nominal), plus lower-priority jobs of the preemptor's own queue, plus lower-priority spot
jobs anywhere. `reclaim`: only the first. `off`: never.
"""

from __future__ import annotations

from dataclasses import dataclass

from railyard.sched.decisions import PreemptReason
from railyard.sched.model import Job
from railyard.sched.policies.registry import PREEMPTION
from railyard.sched.quota import QuotaTree


@dataclass(frozen=True)
class Off:
    name: str = "off"

    def victim_reason(self, preemptor: Job, victim: Job, quota: QuotaTree) -> PreemptReason | None:
        return None


@dataclass(frozen=True)
class ReclaimOnly:
    name: str = "reclaim"

    def victim_reason(self, preemptor: Job, victim: Job, quota: QuotaTree) -> PreemptReason | None:
        if quota.reclaimable(victim.queue, preemptor.queue, preemptor.flavor, preemptor.gpus):
            return PreemptReason.RECLAIM
        return None


@dataclass(frozen=True)
class ReclaimAndPriority:
    name: str = "on"

    def victim_reason(self, preemptor: Job, victim: Job, quota: QuotaTree) -> PreemptReason | None:
        if victim.priority < preemptor.priority and (
            victim.queue == preemptor.queue or victim.preemptible
        ):
            return PreemptReason.PRIORITY
        if quota.reclaimable(victim.queue, preemptor.queue, preemptor.flavor, preemptor.gpus):
            return PreemptReason.RECLAIM
        return None


PREEMPTION.add(Off())
PREEMPTION.add(ReclaimOnly())
PREEMPTION.add(ReclaimAndPriority())
