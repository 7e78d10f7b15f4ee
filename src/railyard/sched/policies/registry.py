"""Named policy registries and the small protocols each kind of policy implements.

A new policy is one small module: implement the protocol, call `<KIND>.add(...)`, and import
the module from `railyard.sched.policies`. `SchedulerConfig` then selects it by name.

Contract that keeps a cycle fast: within one cycle, admission and preemption decisions may
depend on a job's queue, flavor, gang shape and priority (and, for a victim, its queue,
priority and spot flag), not on its id, user or times; the cycle reuses outcomes for jobs
that are alike in those.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Generic, Protocol, TypeVar

from railyard.sched.decisions import PreemptReason
from railyard.sched.limits import queue_time_limit_s
from railyard.sched.model import Job, Queue, RunningJob, Usage, starving_since_t_s
from railyard.sched.quota import QuotaTree
from railyard.sched.snapshot import Masks, Shape, Snapshot


class Named(Protocol):
    @property
    def name(self) -> str: ...


P = TypeVar("P", bound=Named)


class Registry(Generic[P]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, P] = {}

    def add(self, policy: P) -> P:
        if policy.name in self._items:
            raise ValueError(f"{self.kind} policy {policy.name!r} registered twice")
        self._items[policy.name] = policy
        return policy

    def get(self, name: str) -> P:
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} policy {name!r}; known: {self.names()}") from None

    def names(self) -> list[str]:
        return sorted(self._items)


@dataclass(frozen=True)
class OrderContext:
    now_t_s: float
    usage: Usage
    quota: QuotaTree
    pending: Sequence[Job]
    service_levels_gpu_s: tuple[float, ...] = ()
    time_slice_by: str = "attained"
    # (queue, user) of the pending jobs where the driver keeps them (`CycleCache`); None:
    # read them off `pending`
    pending_pairs: Collection[tuple[str, str]] | None = None
    # the running jobs (read by `maxmin`, which ranks users by the GPUs they hold now)
    running: Sequence[RunningJob] = ()
    promotion_wait_ratio: float | None = None  # `SchedulerConfig.promotion_wait_ratio`


@dataclass(frozen=True)
class PreemptContext:
    """What preemption policies read besides the two jobs: the quota tree (as it is during
    the what-if), the time, and the knobs of `SchedulerConfig` they use."""

    quota: QuotaTree
    now_t_s: float
    priority_preemption_min: int | None = None
    service_levels_gpu_s: tuple[float, ...] = ()
    quantum_s: float = 0.0
    time_slice_by: str = "attained"
    starvation_limit_s: float = math.inf
    starved_unsliced_s: float = 0.0
    starving_slices: bool = True
    promotion_wait_ratio: float | None = None
    unsliced_after_s: float = math.inf
    slice_level_gap: int = 1
    unsliced_after_restarts: float = math.inf


def attained_gpu_s(run: RunningJob, now_t_s: float) -> float:
    """GPU-seconds of service a running job has had, its earlier attempts included."""
    return run.job.attained_gpu_s + run.gpus * max(0.0, now_t_s - run.start_t_s)


def level_of(job: Job, attained_gpu_s: float, ctx: PreemptContext) -> int:
    """The service level time slicing puts a job on (0 goes first), given its service so far.

    `attained` (Tiresias' 2D-LAS): cut on that service. `remaining`: cut on what its time
    limit (its own, else its queue's DefaultTime or MaxTime: the one it runs under) still
    lets it use, gpus x limit - attained: shortest remaining first, and the limit is
    enforced, so a short one is no free lunch. A job under no limit cannot say, and is cut on
    its service so far as under `attained` (all on the last level, they tied and ran FIFO
    behind every limited job: on Philly-derived traces, where no job has a limit, `las` was
    FIFO; issue 56). Asked of every running
    job each pass and of each preemptor per victim class; `pending_level` is the same for a
    pending job, with its queue's limit looked up once per cycle."""
    levels = ctx.service_levels_gpu_s
    if ctx.time_slice_by == "attained":
        return bisect_right(levels, attained_gpu_s)
    limit_s = job.walltime_s
    if limit_s is None:
        limit_s = queue_time_limit_s(ctx.quota.queues.get(job.queue))
        if limit_s is None:
            return bisect_right(levels, attained_gpu_s)
    # below zero bisects as zero does
    return bisect_right(levels, job.workers * job.gpus_per_worker * limit_s - attained_gpu_s)


STARVING_LEVEL = -1
"""The level a starving job slices from (`pending_level`'s `starving_t_s`): below every other."""


def pending_level(
    levels: Sequence[float],
    by: str,
    queues: Mapping[str, Queue],
    starving_t_s: float = -math.inf,
    now_t_s: float = 0.0,
    promotion_wait_ratio: float | None = None,
) -> Callable[[Job], int]:
    """`level_of` a pending job (its service is its `attained_gpu_s`), written out inline: a
    cycle asks it of each of 10,000 pending jobs twice (order, then preemption). A job
    submitted by `starving_t_s` (starving: the cycle's first tier) is on `STARVING_LEVEL`,
    as preemption sees it; the order leaves `starving_t_s` out, the cycle tiers it. With
    `promotion_wait_ratio`, a job promoted at `now_t_s` (`pending_promoted`) is on level 0."""
    level: Callable[[Job], int]
    if by == "attained":
        level = lambda j: bisect_right(levels, j.attained_gpu_s)  # noqa: E731
    else:
        defaults = {name: queue_time_limit_s(q) for name, q in queues.items()}

        def level(j: Job) -> int:
            limit_s = j.walltime_s
            if limit_s is None:
                limit_s = defaults.get(j.queue)
                if limit_s is None:
                    return bisect_right(levels, j.attained_gpu_s)
            gpu_s = j.workers * j.gpus_per_worker * limit_s
            return bisect_right(levels, gpu_s - j.attained_gpu_s)

    if promotion_wait_ratio is not None:
        by_service, ratio = level, promotion_wait_ratio

        def or_promoted(j: Job) -> int:
            return 0 if pending_promoted(j, now_t_s, ratio) else by_service(j)

        level = or_promoted

    if starving_t_s == -math.inf:
        return level

    def or_starving(j: Job) -> int:
        if j.submit_t_s <= starving_t_s and starving_since_t_s(j) <= starving_t_s:
            return STARVING_LEVEL
        return level(j)

    return or_starving


def promoted(waited_s: float, ran_s: float, ratio: float | None) -> bool:
    """Time slicing's promotion (`SchedulerConfig.promotion_wait_ratio`): a job that has run
    and has waited, in all, `ratio` times as long ranks on the first level."""
    return ratio is not None and ran_s > 0 and waited_s >= ratio * ran_s


def pending_promoted(job: Job, now_t_s: float, ratio: float | None) -> bool:
    """`promoted` for a pending job: it waited since `starving_since_t_s`, less what it ran."""
    gpus = job.workers * job.gpus_per_worker
    if ratio is None or job.attained_gpu_s <= 0 or gpus <= 0:
        return False
    return promoted(now_t_s - starving_since_t_s(job), job.attained_gpu_s / gpus, ratio)


def starving(job: Job, ctx: PreemptContext) -> bool:
    """Waiting since the starvation limit ago: the cycle's starving tier (the same test)."""
    return starving_since_t_s(job) <= ctx.now_t_s - ctx.starvation_limit_s


def starving_t_s(ctx: PreemptContext) -> float:
    """Jobs submitted by then slice as starving (`SchedulerConfig.starving_slices`)."""
    return ctx.now_t_s - ctx.starvation_limit_s if ctx.starving_slices else -math.inf


SortKey = Callable[[Job], tuple[object, ...]]
Rank = Callable[[Job], int]


class OrderingPolicy(Protocol):
    """Returns the key that orders pending jobs (after the starving-first tier)."""

    @property
    def name(self) -> str: ...

    def sort_key(self, ctx: OrderContext) -> SortKey: ...


class RankedOrdering(OrderingPolicy, Protocol):
    """An ordering whose `sort_key` is `(rank(job), job.submit_t_s, job.tie)`, or with no
    rank `(job.submit_t_s, job.tie)`: the cycle then sorts by each part in turn (stable
    sorts, last key first), each compared in C, instead of by tuples whose first parts
    are mostly equal (10,000 pending jobs: about a fifth of a cycle)."""

    def rank(self, ctx: OrderContext) -> Rank | None: ...


def in_order(
    jobs: list[Job],
    policy: OrderingPolicy,
    ctx: OrderContext,
    *,
    by_arrival: bool = False,
) -> None:
    """Sort `jobs` in place by `policy.sort_key(ctx)`, by parts where the policy ranks.
    `by_arrival`: the jobs are already in arrival order (submit time, then number), the
    ranked order's last keys, so only the rank is left to sort by. (Where the rank reads
    nothing but the job, `kept_rank`, a driver's cache keeps the whole line sorted between
    cycles instead: `cache.RankedOrder`.)"""
    ranked = getattr(policy, "rank", None)
    if ranked is None:
        jobs.sort(key=policy.sort_key(ctx))
        return
    rank: Rank | None = ranked(ctx)
    if not by_arrival:
        if len(set(map(SUBMIT_T_S, jobs))) < len(jobs):  # jobs of one instant: by number
            jobs.sort(key=TIE)
        jobs.sort(key=SUBMIT_T_S)
    if rank is not None:
        jobs.sort(key=rank)


SUBMIT_T_S = attrgetter("submit_t_s")
TIE = attrgetter("tie")


def minus_priority(job: Job) -> int:
    """Higher priority first, as a key in C-compared ints."""
    return -job.priority


class AdmissionPolicy(Protocol):
    """Decides whether a job's queue may take its GPUs now. With `defers_borrowing`, jobs
    that fit only by borrowing are admitted after all jobs that fit their nominal quota."""

    @property
    def name(self) -> str: ...

    @property
    def defers_borrowing(self) -> bool: ...

    def fits(self, quota: QuotaTree, job: Job) -> bool: ...


class PlacementPolicy(Protocol):
    """Finds GPUs for the whole gang, or None. Must not change the snapshot."""

    @property
    def name(self) -> str: ...

    def place(self, snap: Snapshot, shape: Shape) -> Masks | None: ...


class BackfillPolicy(Protocol):
    """Decides which blocked jobs get a reservation that later jobs must not delay, and whether
    a blocked job stops the jobs behind it outright (`blocks`: no backfill at all)."""

    @property
    def name(self) -> str: ...

    @property
    def blocks(self) -> bool: ...

    def reserves(self, reserved_for_flavor: int, max_reservations: int) -> bool: ...


class PreemptionPolicy(Protocol):
    """Says whether (and why) `victim` may be evicted to make room for `preemptor`.

    Victims alike under `victim_class` must get the same answer for the same preemptor: the
    cycle asks once per class. Whether a victim's minimum run time has passed, whether the
    eviction would be undone by the victim evicting the preemptor back, and the cost of each
    victim set are the cycle's business, not the policy's.
    """

    @property
    def name(self) -> str: ...

    def may_preempt(self, preemptor: Job, ctx: PreemptContext) -> bool:
        """False if `preemptor` can evict nobody at all (a cheap test before any search)."""
        ...

    def victim_class(self, victim: RunningJob, ctx: PreemptContext) -> Hashable: ...

    def victim_reason(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None: ...

    def reason_without_quota(
        self, preemptor: Job, victim: RunningJob, ctx: PreemptContext
    ) -> PreemptReason | None:
        """A reason `victim_reason` gives whatever the quota's use (None: it must be asked).
        Whether a victim would evict its preemptor back is asked with the two swapped in
        the quota tree; a reason that does not read the quota spares that what-if. Of the
        preemptor it may read only its priority and what its class under time slicing (its
        service level) captures: a pass keeps the answer per victim class for them."""
        ...

    @property
    def quota_reason_is_reclaim(self) -> bool:
        """True if `victim_reason` is `reason_without_quota`, else reclaim when `reclaims`:
        a pass then keeps the quota-free part per victim class, and whether a victim would
        evict its preemptor back is read off the two branches' totals
        (`QuotaTree.reclaimable_moved`), with no what-if."""
        ...


ORDERING: Registry[OrderingPolicy] = Registry("ordering")
ADMISSION: Registry[AdmissionPolicy] = Registry("admission")
PLACEMENT: Registry[PlacementPolicy] = Registry("placement")
BACKFILL: Registry[BackfillPolicy] = Registry("backfill")
PREEMPTION: Registry[PreemptionPolicy] = Registry("preemption")
