"""Preemption policies: who may be evicted for whom (the cycle picks the cheapest set).

`reclaim`: a queue branch under its nominal quota takes back what another branch borrowed
  (Kueue's `reclaimWithinCohort: Any`, but beyond the loan a job of higher priority than
  the reclaimer only if it borrows itself: `lenders.reclaims_only_borrowed`); on in every
  policy but `off`.
`on` (default): reclaim, plus priority preemption where it was opted into: a job of a queue
  with `priority_preemption` (or of at least `priority_preemption_min`) evicts lower-priority
  jobs of its own queue (Kueue's `withinClusterQueue: LowerPriority`), and lower-priority
  preemptible jobs of other queues when it need not borrow to run. Slurm's default is no
  priority preemption (`PreemptType=preempt/none`); neither is railyard's.
`las`: reclaim, plus time slicing by least attained service (see `policies/las.py`).
`off`: never.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

from railyard.sched.decisions import PreemptReason
from railyard.sched.model import Job, RunningJob
from railyard.sched.policies.registry import PREEMPTION, PreemptContext


def reclaims(preemptor: Job, victim: RunningJob, ctx: PreemptContext) -> bool:
    return ctx.quota.reclaimable(
        victim.job.queue, preemptor.queue, preemptor.flavor, preemptor.gpus
    )


def may_reclaim(preemptor: Job, ctx: PreemptContext) -> bool:
    return ctx.quota.may_reclaim(preemptor.queue, preemptor.flavor, preemptor.gpus)


def within_nominal(preemptor: Job, ctx: PreemptContext) -> bool:
    """Would the preemptor's queue stay within its own nominal quota? A job may not evict
    another queue's job in order to borrow (Kueue's `borrowWithinCohort: Never`): the lender
    would reclaim at once, and the two would take turns forever."""
    key = (preemptor.queue, preemptor.flavor)
    quota = ctx.quota
    return quota.total.get(key, 0) + preemptor.gpus <= quota.subtree_nominal.get(key, 0)


def by_queue_priority(victim: RunningJob, ctx: PreemptContext) -> Hashable:
    j = victim.job
    return (j.queue, j.priority, j.preemptible)


@dataclass(frozen=True)
class Off:
    name: str = "off"
    quota_reason_is_reclaim: bool = False  # it gives no reason at all

    def may_preempt(self, preemptor: Job, ctx: PreemptContext) -> bool:
        return False

    def victim_class(self, victim: RunningJob, ctx: PreemptContext) -> Hashable:
        return None

    def victim_class_until(self, victim: RunningJob, ctx: PreemptContext) -> tuple[Hashable, float]:
        return None, math.inf

    def reason_without_quota(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        return None

    def victim_reason(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        return None


@dataclass(frozen=True)
class ReclaimOnly:
    name: str = "reclaim"
    quota_reason_is_reclaim: bool = True

    def may_preempt(self, preemptor: Job, ctx: PreemptContext) -> bool:
        return may_reclaim(preemptor, ctx)

    def victim_class(self, victim: RunningJob, ctx: PreemptContext) -> Hashable:
        return by_queue_priority(victim, ctx)

    def victim_class_until(self, victim: RunningJob, ctx: PreemptContext) -> tuple[Hashable, float]:
        return by_queue_priority(victim, ctx), math.inf  # the job's own: while it runs

    def reason_without_quota(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        return None

    def victim_reason(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        return PreemptReason.RECLAIM if reclaims(preemptor, victim, ctx) else None


def may_preempt_by_priority(preemptor: Job, ctx: PreemptContext) -> bool:
    queue = ctx.quota.queues.get(preemptor.queue)
    floor = ctx.priority_preemption_min
    return (queue is not None and queue.priority_preemption) or (
        floor is not None and preemptor.priority >= floor
    )


@dataclass(frozen=True)
class ReclaimAndPriority:
    name: str = "on"
    quota_reason_is_reclaim: bool = False

    def may_preempt(self, preemptor: Job, ctx: PreemptContext) -> bool:
        return may_preempt_by_priority(preemptor, ctx) or may_reclaim(preemptor, ctx)

    def victim_class(self, victim: RunningJob, ctx: PreemptContext) -> Hashable:
        return by_queue_priority(victim, ctx)

    def victim_class_until(self, victim: RunningJob, ctx: PreemptContext) -> tuple[Hashable, float]:
        return by_queue_priority(victim, ctx), math.inf  # the job's own: while it runs

    def reason_without_quota(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        return None

    def victim_reason(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        v = victim.job
        if (
            v.priority < preemptor.priority
            and (v.queue == preemptor.queue or (v.preemptible and within_nominal(preemptor, ctx)))
            and may_preempt_by_priority(preemptor, ctx)
        ):
            return PreemptReason.PRIORITY
        return PreemptReason.RECLAIM if reclaims(preemptor, victim, ctx) else None


PREEMPTION.add(Off())
PREEMPTION.add(ReclaimOnly())
PREEMPTION.add(ReclaimAndPriority())
