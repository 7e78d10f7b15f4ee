"""Time slicing by least attained service (Tiresias' discretized 2D-LAS).

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019: a job's
attained service is GPUs x time it has run (across attempts); jobs sit in priority queues cut
at service thresholds (`SchedulerConfig.service_levels_gpu_s`), the least-served queue first
and FIFO inside a queue. A waiting job of a lower queue preempts running jobs of higher ones
through the checkpoint handshake, so short jobs finish fast while long ones are not starved
forever (the cycle's starvation limit still ages every job). Unlike the paper, a victim must
have run `time_slice_quantum_s` in its attempt (no thrashing: each restart costs a
checkpoint and a restore), jobs submitted with `preemptible=False` are never sliced, and
quotas hold (reclaim stays on; a queue's quota is never exceeded to slice).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable
from dataclasses import dataclass

from railyard.sched.decisions import PreemptReason
from railyard.sched.model import Job, RunningJob
from railyard.sched.policies.preemption import may_reclaim, reclaims
from railyard.sched.policies.registry import (
    ORDERING,
    PREEMPTION,
    OrderContext,
    PreemptContext,
    Rank,
    SortKey,
    attained_gpu_s,
    service_level,
)


@dataclass(frozen=True)
class LeastAttainedService:
    """Priority first (users' priorities still rule), then service level, then arrival."""

    name: str = "las"

    def sort_key(self, ctx: OrderContext) -> SortKey:
        levels = ctx.service_levels_gpu_s  # service_level's bisect, inline: 10,000 calls
        return lambda j: (-j.priority, bisect_right(levels, j.attained_gpu_s), j.submit_t_s, j.tie)

    def rank(self, ctx: OrderContext) -> Rank | None:
        levels, span = ctx.service_levels_gpu_s, len(ctx.service_levels_gpu_s) + 1
        return lambda j: -j.priority * span + bisect_right(levels, j.attained_gpu_s)


@dataclass(frozen=True)
class TimeSlice:
    name: str = "las"
    quota_reason_is_reclaim: bool = True

    def may_preempt(self, preemptor: Job, ctx: PreemptContext) -> bool:
        levels = ctx.service_levels_gpu_s
        lowest = service_level(preemptor.attained_gpu_s, levels) < len(levels)
        return lowest or may_reclaim(preemptor, ctx)

    def victim_class(self, victim: RunningJob, ctx: PreemptContext) -> Hashable:
        j = victim.job
        sliceable = j.preemptible and ctx.now_t_s - victim.start_t_s >= ctx.quantum_s
        level = service_level(attained_gpu_s(victim, ctx.now_t_s), ctx.service_levels_gpu_s)
        return (j.queue, j.priority, j.preemptible, sliceable, level)

    def reason_without_quota(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        v = victim.job
        levels = ctx.service_levels_gpu_s
        if (
            v.preemptible
            and v.priority <= preemptor.priority
            and ctx.now_t_s - victim.start_t_s >= ctx.quantum_s
            and service_level(attained_gpu_s(victim, ctx.now_t_s), levels)
            > service_level(preemptor.attained_gpu_s, levels)
        ):
            return PreemptReason.TIME_SLICE
        return None

    def victim_reason(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        sliced = self.reason_without_quota(preemptor, victim, ctx)
        if sliced is not None:
            return sliced
        return PreemptReason.RECLAIM if reclaims(preemptor, victim, ctx) else None


ORDERING.add(LeastAttainedService())
PREEMPTION.add(TimeSlice())
