"""Time slicing by service level: Tiresias' discretized 2D-LAS, or shortest remaining first.

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019: a job's
attained service is GPUs x time it has run (across attempts); jobs sit in priority queues cut
at service thresholds (`SchedulerConfig.service_levels_gpu_s`), the least-served queue first
and FIFO inside a queue. A waiting job of a lower queue preempts running jobs of higher ones
through the checkpoint handshake. With `time_slice_by="remaining"` (the default) the levels
are cut on what a job's time limit still lets it use, GPUs x limit minus attained service:
shortest remaining first, which Tiresias cannot do without run times but a cluster whose
limits are enforced can (a limit set short is a job killed early, so it is no free pass).
A job under no limit (none of its own, none from its queue) is cut on its attained service,
as Tiresias ranks every job (issue 56: ranked after every job with a limit, on traces where
no job has one all tied and `las` ran FIFO).
On the Gavel-profile jobs of `benchmarks/compare_policies.py` it cut mean JCT 1.09x and
1.57x at loads 1.2 and 1.5 against attained service at the last round's knobs.

Unlike the paper, a job slices only jobs at least `slice_level_gap` levels above its own (3
by time slicing's defaults: a job a level or two past a newcomer was sliced for it again and
again, and the longest jobs set the p99, issue 56), a victim must have run
`time_slice_quantum_s` in its attempt (each restart costs a checkpoint and a restore) and,
where `unsliced_after_s` is set, less than that over all its attempts (a job that has shown
it is long runs to its end) and, where `unsliced_after_restarts` is set (off by default),
have been restarted fewer times than that (the longest jobs were sliced 3-66
times each on Gavel's Philly VCs, each time waiting for their GPUs again), an attempt that
began after its job waited out the starvation limit runs `starved_unsliced_s` (by default to
its end) before it may be sliced, a starving job slices any sliceable job whatever its level
(it had waited for a node to drain, days for 8-GPU gangs: on the Gavel-profile jobs their
p99 JCT fell from 334 and 366 h to 307 and 333 h at loads 1.2 and 1.5, under
fairshare+easy's 313 and 339; mean JCT rose 1-6%), so a running job past that limit is not
sliced by one that is not (it would slice straight back), jobs submitted with
`preemptible=False` are never sliced, and quotas hold (reclaim stays on; a queue's quota is
never exceeded to slice).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from railyard.sched.decisions import PreemptReason
from railyard.sched.limits import queue_time_limit_s, queue_time_limits
from railyard.sched.model import Job, RunningJob, starving_since_t_s
from railyard.sched.policies.preemption import may_reclaim, reclaims
from railyard.sched.policies.registry import (
    ORDERING,
    PREEMPTION,
    OrderContext,
    PreemptContext,
    Rank,
    SortKey,
    attained_gpu_s,
    level_of,
    pending_level,
    pending_promoted,
    promoted,
    starving,
)


@dataclass(frozen=True)
class LeastAttainedService:
    """Priority first (users' priorities still rule), then service level, then arrival."""

    name: str = "las"

    def sort_key(self, ctx: OrderContext) -> SortKey:
        level = _order_level(ctx)
        return lambda j: (-j.priority, level(j), j.submit_t_s, j.tie)

    def rank(self, ctx: OrderContext) -> Rank | None:
        level = _order_level(ctx)
        span = len(ctx.service_levels_gpu_s) + 1
        return lambda j: -j.priority * span + level(j)

    def kept_rank(self, ctx: OrderContext) -> tuple[Hashable, Rank]:
        """The rank reads the job and, of the cycle, only the levels, what they cut on and
        the queues' time limits: with those the same, a pending job keeps its rank. Under
        promotion it reads the time too, and is kept for one cycle only."""
        now = ctx.now_t_s if ctx.promotion_wait_ratio is not None else None
        key = (
            ctx.service_levels_gpu_s,
            ctx.time_slice_by,
            queue_time_limits(ctx.quota.queues),
            ctx.promotion_wait_ratio,
            now,
        )
        rank = self.rank(ctx)
        assert rank is not None
        return key, rank


def _order_level(ctx: OrderContext) -> Rank:
    return pending_level(
        ctx.service_levels_gpu_s,
        ctx.time_slice_by,
        ctx.quota.queues,
        now_t_s=ctx.now_t_s,
        promotion_wait_ratio=ctx.promotion_wait_ratio,
    )


def _preemptor_level(job: Job, ctx: PreemptContext) -> int:
    """A pending job's level: 0 while promoted (`registry.pending_promoted`)."""
    if pending_promoted(job, ctx.now_t_s, ctx.promotion_wait_ratio):
        return 0
    return level_of(job, job.attained_gpu_s, ctx)


def _victim_waited_s(victim: RunningJob) -> float:
    """What a running job had waited, in all, when this attempt began."""
    return victim.start_t_s - starving_since_t_s(victim.job)


def _victim_level(victim: RunningJob, ctx: PreemptContext) -> int:
    """A running job's level: 0 while promoted, until the time it has run (this attempt
    too) reaches its waiting over the ratio; then its service's."""
    served = attained_gpu_s(victim, ctx.now_t_s)
    if victim.gpus > 0 and promoted(
        _victim_waited_s(victim), served / victim.gpus, ctx.promotion_wait_ratio
    ):
        return 0
    return level_of(victim.job, served, ctx)


CLASS_MARGIN_S = 1e-3


def _class_until(victim: RunningJob, ctx: PreemptContext) -> float:
    """When `victim_class` may next change: its slicing flag at the end of the quantum or of
    a starved start's unsliced run, its level when its service (growing by its GPUs each
    second) crosses a threshold, up under `attained` or its time left down under
    `remaining`."""
    j, now, start = victim.job, ctx.now_t_s, victim.start_t_s
    until = math.inf
    if j.preemptible:
        ran_s = now - start
        if ran_s < ctx.quantum_s:
            until = start + ctx.quantum_s
        elif (
            start - starving_since_t_s(j) >= ctx.starvation_limit_s
            and ran_s < ctx.starved_unsliced_s
        ):
            until = start + ctx.starved_unsliced_s
        left_s = ctx.unsliced_after_s - ran_before_s(j)
        if ran_s < left_s:  # unsliceable once it has run `unsliced_after_s` in all
            until = min(until, start + left_s)
    gpus = victim.gpus
    if gpus <= 0:
        return until
    levels = ctx.service_levels_gpu_s
    served = attained_gpu_s(victim, now)
    ratio = ctx.promotion_wait_ratio
    if ratio is not None and promoted(_victim_waited_s(victim), served / gpus, ratio):
        # back to its service's level once its run time reaches its waiting over the ratio
        until = min(until, start + _victim_waited_s(victim) / ratio - j.attained_gpu_s / gpus)
    limit_s = j.walltime_s
    if limit_s is None and ctx.time_slice_by == "remaining":
        limit_s = queue_time_limit_s(ctx.quota.queues.get(j.queue))
    if ctx.time_slice_by == "attained" or limit_s is None:  # no limit: cut on service
        level = bisect_right(levels, served)
        if level < len(levels):  # up a level once service reaches the next threshold
            until = min(until, start + (levels[level] - j.attained_gpu_s) / gpus)
        return until
    whole = j.workers * j.gpus_per_worker * limit_s
    level = bisect_right(levels, whole - served)
    if level > 0:  # down a level once the time left falls below this level's threshold
        until = min(until, start + (whole - levels[level - 1] - j.attained_gpu_s) / gpus)
    return until


def _class_and_until(victim: RunningJob, ctx: PreemptContext) -> tuple[Hashable, float]:
    """`victim_class` and `_class_until` less the margin, in one pass (`_classes_and_until`
    of one job: one copy of the rule for both)."""
    classes, untils = _classes_and_until((victim,), ctx)
    return classes[0], untils[0]


def _classes_and_until(
    runs: Sequence[RunningJob], ctx: PreemptContext
) -> tuple[list[Hashable], list[float]]:
    """`_class_and_until` of each of `runs`, in one loop, as two columns (no pair a job for
    the collector): the context's knobs, the queues' limits and `starving_since_t_s` read
    outside it or inline (73,500 jobs on a start at 100,352 GPUs, issue 56). The same
    expressions in the same order, so the same floats (tests compare the two)."""
    now, quantum_s, starvation_s = ctx.now_t_s, ctx.quantum_s, ctx.starvation_limit_s
    starved_s, unsliced_s = ctx.starved_unsliced_s, ctx.unsliced_after_s
    restarts_max = ctx.unsliced_after_restarts
    ratio, levels, by = ctx.promotion_wait_ratio, ctx.service_levels_gpu_s, ctx.time_slice_by
    n_levels, margin_s, inf = len(levels), CLASS_MARGIN_S, math.inf
    on_service, by_limit = by == "attained", by == "remaining"
    queue_limits: dict[str, float | None] = {}
    classes: list[Hashable] = []
    untils: list[float] = []
    add_class, add_until = classes.append, untils.append
    has_ratio = ratio is not None
    for victim in runs:
        j = victim.job
        start, gpus = victim.start_t_s, victim.gpus
        ran_s = now - start
        attained = j.attained_gpu_s
        until = inf
        sliceable = False
        preemptible = j.preemptible
        since = 0.0  # read only by a preemptible job's starvation and by promotion
        if preemptible or has_ratio:
            job_gpus = j.workers * j.gpus_per_worker
            begin = j.begin_t_s  # `starving_since_t_s`, inline
            since = j.submit_t_s if begin is None or begin < j.submit_t_s else begin
            if attained > 0 and job_gpus > 0:
                since = since + attained / job_gpus
        if preemptible:
            before_s = attained / job_gpus if job_gpus > 0 else 0.0
            if ran_s < quantum_s:
                until = start + quantum_s
            else:
                starved = start - since >= starvation_s
                if starved and ran_s < starved_s:
                    until = start + starved_s
                sliceable = (
                    before_s + ran_s < unsliced_s
                    and j.restart_count < restarts_max
                    and (not starved or ran_s >= starved_s)
                )
            left_s = unsliced_s - before_s
            if ran_s < left_s:
                t_s = start + left_s  # `min(until, t_s)`, inline, as `min` picks
                until = t_s if t_s < until else until
        served = attained + gpus * (ran_s if ran_s > 0.0 else 0.0)  # `max(0.0, ran_s)`
        waited_s = 0.0
        up = False
        if ratio is not None and gpus > 0:
            waited_s = start - since
            ran = served / gpus  # `promoted`, inline
            up = ran > 0 and waited_s >= ratio * ran
        limit_s = j.walltime_s
        if limit_s is None and by_limit:
            name = j.queue
            if name in queue_limits:
                limit_s = queue_limits[name]
            else:
                limit_s = queue_limits[name] = queue_time_limit_s(ctx.quota.queues.get(name))
        if on_service or limit_s is None:
            level = bisect_right(levels, served)
            if gpus > 0 and level < n_levels:
                t_s = start + (levels[level] - attained) / gpus
                until = t_s if t_s < until else until
        else:
            whole = j.workers * j.gpus_per_worker * limit_s
            level = bisect_right(levels, whole - served)
            if gpus > 0 and level > 0:
                t_s = start + (whole - levels[level - 1] - attained) / gpus
                until = t_s if t_s < until else until
        if up and ratio is not None:  # `up` says so; mypy does not follow it
            until = min(until, start + waited_s / ratio - attained / gpus)
            level = 0
        add_class((j.queue, j.priority, preemptible, sliceable, level))
        add_until(until - margin_s)
    return classes, untils


def ran_before_s(job: Job) -> float:
    """How long a job ran in its earlier attempts: its service over its GPUs."""
    gpus = job.workers * job.gpus_per_worker
    return job.attained_gpu_s / gpus if gpus > 0 else 0.0


def _sliceable(victim: RunningJob, ctx: PreemptContext) -> bool:
    """Preemptible, ran a quantum, has not yet run `unsliced_after_s` in all (a job
    that has shown it is long runs to its end: sliced by every newcomer, the longest jobs
    set `las`'s p99, issue 56) and has been restarted fewer than `unsliced_after_restarts`
    times (each stop cost it a wait for its GPUs again); an attempt that began after the job
    had waited out the starvation limit runs `starved_unsliced_s` first (big gangs' tail:
    sliced again minutes after each starved start, they made next to no progress)."""
    j, now = victim.job, ctx.now_t_s
    ran_s = now - victim.start_t_s
    if not j.preemptible or ran_s < ctx.quantum_s:
        return False
    if ran_before_s(j) + ran_s >= ctx.unsliced_after_s:
        return False
    if j.restart_count >= ctx.unsliced_after_restarts:
        return False
    starved = victim.start_t_s - starving_since_t_s(j) >= ctx.starvation_limit_s
    return not starved or ran_s >= ctx.starved_unsliced_s


@dataclass(frozen=True)
class TimeSlice:
    name: str = "las"
    quota_reason_is_reclaim: bool = True

    def may_preempt(self, preemptor: Job, ctx: PreemptContext) -> bool:
        if ctx.starving_slices and starving(preemptor, ctx):
            return True
        top = len(ctx.service_levels_gpu_s)  # no job is above that level
        low = _preemptor_level(preemptor, ctx) + ctx.slice_level_gap <= top
        return low or may_reclaim(preemptor, ctx)

    def victim_class(self, victim: RunningJob, ctx: PreemptContext) -> Hashable:
        j = victim.job
        sliceable = _sliceable(victim, ctx)
        level = _victim_level(victim, ctx)
        return (j.queue, j.priority, j.preemptible, sliceable, level)

    def victim_class_until(self, victim: RunningJob, ctx: PreemptContext) -> tuple[Hashable, float]:
        """The class, and the time before which it stays: the end of the quantum (or of a
        starved start's unsliced run) and the next level its service crosses into, less a
        millisecond so that rounding never keeps a class a fresh look would not give."""
        return _class_and_until(victim, ctx)

    def victim_classes_until(
        self, runs: Sequence[RunningJob], ctx: PreemptContext
    ) -> tuple[list[Hashable], list[float]]:
        """`victim_class_until` of each of `runs` (a start's 73,500 jobs), in one loop: the
        classes and the times, in `runs`' order."""
        return _classes_and_until(runs, ctx)

    def reason_without_quota(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        """A job slices one at least `slice_level_gap` levels above its own; a starving job,
        any sliceable one (its own priority or lower, as always)."""
        v = victim.job
        if (
            v.priority <= preemptor.priority
            and _sliceable(victim, ctx)
            and (
                (ctx.starving_slices and starving(preemptor, ctx))
                or _victim_level(victim, ctx)
                >= _preemptor_level(preemptor, ctx) + ctx.slice_level_gap
            )
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
