"""One scheduling cycle: `cycle(state, now_t_s, config, cache) -> CycleResult`.

The cycle reads the state, builds a snapshot, and decides. It never mutates its input,
reads no clock and does no I/O; the only thing a driver may keep between calls is a
`CycleCache` (railyard.sched.cache: inventory indexes, the running jobs' booking and the
pending order, moved by what changed since the last call, and memos of pure functions), so
the simulator and the live control plane get the same decisions for the same state, with or
without the cache. One cache serves one driver's sequence of cycles (one thread).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache as cache_fn
from itertools import chain

from railyard.sched.admit import Pass, Policies
from railyard.sched.cache import Booking, CycleCache, by_arrival
from railyard.sched.config import SchedulerConfig
from railyard.sched.decisions import CycleResult, Requeue
from railyard.sched.limits import Estimates
from railyard.sched.model import ClusterState, Job, NodeState, RunningJob, starving_since_t_s
from railyard.sched.policies import ADMISSION, BACKFILL, ORDERING, PLACEMENT, PREEMPTION
from railyard.sched.policies.registry import (
    SUBMIT_T_S,
    TIE,
    OrderContext,
    in_order,
    minus_priority,
)
from railyard.sched.quota import QuotaTree
from railyard.sched.reserve import Blocker, earliest_start
from railyard.sched.snapshot import Load, Masks, Shape, Snapshot, Topology


def resolve(config: SchedulerConfig) -> Policies:
    return Policies(
        ordering=ORDERING.get(config.ordering),
        admission=ADMISSION.get(config.admission),
        placement=PLACEMENT.get(config.placement),
        backfill=BACKFILL.get(config.backfill),
        preemption=PREEMPTION.get(config.preemption),
    )


@dataclass(frozen=True)
class _Booked:
    topo: Topology
    snap: Snapshot
    quota: QuotaTree
    run_masks: dict[str, Masks]
    run_loads: dict[str, Load]  # only jobs that ask for cores or memory
    running: tuple[RunningJob, ...]  # sorted by id
    booking: Booking


def _book(state: ClusterState, cache: CycleCache | None) -> _Booked:
    """Index the inventory and book every running job's GPUs, cores, memory and quota.

    The booking (railyard.sched.cache) is kept between cycles in the cache and moved by what
    started and ended since; the snapshot is built once from its free masks, which is much
    cheaper than taking each job's GPUs from a full snapshot one by one.
    """
    if cache is not None:
        topo = cache.topology(state.nodes)
        booking = cache.booking(topo, state.running)
    else:
        topo = Topology(state.nodes)
        booking = Booking(topo)
        booking.update(state.running)
    # every node's flavor is a key of `max_gpus_all` (no walk over 12,544 nodes a cycle)
    flavors = set(topo.max_gpus_all) | {j.flavor for j in state.pending}
    quota = QuotaTree(state.queues, flavors)
    snap = booking.snapshot()
    for (queue, flavor), gpus in sorted(booking.usage.items()):
        if queue in quota.queues:
            quota.add(queue, flavor, gpus)
    return _Booked(
        topo, snap, quota, dict(booking.run_masks), dict(booking.run_loads), booking.running,
        booking,
    )  # fmt: skip


def _estimates(state: ClusterState, quota: QuotaTree, config: SchedulerConfig) -> Estimates:
    return Estimates(
        quota.queues, state.runtime_history_s, config.default_walltime_s, config.kill_wait_s
    )


def cycle(
    state: ClusterState,
    now_t_s: float,
    config: SchedulerConfig | None = None,
    cache: CycleCache | None = None,
) -> CycleResult:
    """Decide starts, preemptions, requeues and a reason for every job left pending.

    Raises ValueError if the state books one GPU to two running jobs.
    """
    config = config or SchedulerConfig()
    policies = resolve(config)

    # 1. Take a snapshot: free-GPU aggregates and quota usage, with running jobs booked.
    booked = _book(state, cache)

    # 2. Requeue jobs that run on a node that went down; their GPUs stay booked until the
    #    driver reports them stopped, exactly like a preemption victim.
    down = {n.name for n in state.nodes if n.state is NodeState.DOWN}
    requeues = tuple(
        Requeue(r.id)
        for r in (booked.running if down else ())
        if r.stop_cause is None and not down.isdisjoint(r.placement)
    )

    # 3. Order the pending jobs: nominated jobs first (their victims' GPUs are theirs), then
    #    starving jobs (oldest first within a priority), then the rest by the policy's key.
    starving_t_s = now_t_s - config.starvation_limit_s
    if cache is not None:
        arrived = cache.pending.update(state.pending)
    else:
        arrived = sorted(state.pending, key=by_arrival)
    ctx = OrderContext(
        now_t_s,
        state.usage,
        booked.quota,
        state.pending,
        config.service_levels_gpu_s,
        config.time_slice_by,
        cache.pending.pairs if cache is not None and cache.pending.jobs else None,
        running=booked.running,
        promotion_wait_ratio=config.promotion_wait_ratio,
    )
    # arrival order is every order's last key: each part below is re-sorted by its first
    # keys only (stable sorts); starving jobs are among the earliest, a prefix, less those
    # that only began to wait later or ran in earlier attempts (`starving_since_t_s`: a
    # --begin, a released hold, a met dependency, service had)
    nominated = [j for j in arrived if j.nominated]
    cut = bisect_right(arrived, starving_t_s, key=SUBMIT_T_S)
    starving = [j for j in arrived[:cut] if not j.nominated] if cut else []
    late = [j for j in starving if starving_since_t_s(j) > starving_t_s]
    if late:
        starving = [j for j in starving if starving_since_t_s(j) <= starving_t_s]
    nominated.sort(key=TIE)
    starving.sort(key=minus_priority)
    kept = getattr(policies.ordering, "kept_rank", None)
    if kept is not None and cache is not None and arrived is cache.pending.jobs:
        # a rank that reads only the job: the whole line is kept in that order between
        # cycles, and the rest is what is left of it once the two parts above are out
        rest = cache.ranked.of(cache.pending, *kept(ctx))
        if cut or nominated:
            rest = [
                j
                for j in rest
                if not j.nominated
                and (j.submit_t_s > starving_t_s or starving_since_t_s(j) > starving_t_s)
            ]
    else:
        rest = [j for j in arrived[cut:] if not j.nominated] if nominated else arrived[cut:]
        rest = late + rest if late else rest  # the earliest arrivals: the front, in order
        in_order(rest, policies.ordering, ctx, by_arrival=True)
    ordered = nominated + starving + rest

    # 4. Admit in order: feasibility, quota, placement; else preempt; else a reason and maybe
    #    a reservation. Like Kueue, jobs that fit their nominal quota go before jobs that must
    #    borrow, so quota given back by a reclaim is not borrowed again by the queue that
    #    lost it.
    estimates = _estimates(state, booked.quota, config)
    blockers = cache_fn(
        lambda: booked.booking.blockers(
            now_t_s, estimates.running_end_t_s, estimates.running_ends_fixed_t_s
        )
    )
    admit = Pass(
        now_t_s=now_t_s,
        config=config,
        policies=policies,
        snap=booked.snap,
        quota=booked.quota,
        running=booked.running,
        run_masks=booked.run_masks,
        run_loads=booked.run_loads,
        requeued={r.job_id for r in requeues},
        estimates=estimates,
        running_blockers=blockers,
        running_events=(
            (lambda flavor: booked.booking.events.of(flavor, blockers()))
            if cache is not None
            else None
        ),
        kept_classes=cache.classes if cache is not None else None,
        waiting=ordered,
    )
    throttled = any(j.array_max_running is not None for j in rest)
    first = chain(nominated, starving, _behind_heads(rest, admit)) if throttled else ordered
    borrowers = admit.admit_in_order(first, starving_t_s=starving_t_s, defer_borrowing=True)
    then = _behind_heads(borrowers, admit) if throttled else borrowers
    admit.admit_in_order(then, starving_t_s=-math.inf)

    # 5. Collect the decisions.
    return CycleResult(
        starts=tuple(admit.starts),
        preemptions=tuple(admit.preemption.decisions),
        requeues=requeues,
        pending_reasons=admit.reasons,
        reservations=dict(admit.reservations),
        nominated=frozenset(admit.nominated),
    )


def _behind_heads(jobs: Iterable[Job], admit: Pass) -> Iterator[Job]:
    """`jobs` (neither nominated nor starving) in order, but a throttled array's tasks wait
    behind the first job of their flavor that reserves GPUs or stops its flavor (the head)
    and are decided just after it: they may backfill around its reservation but never take
    the GPUs it waits for. The tasks were held (`JobArrayTaskLimit`) while the head queued;
    taken in their arrival order, each one released by a sibling's end went ahead of it, so
    a `%2` array ran to its end before an 8-GPU job queued behind it (issue 56 item 3; Slurm
    starts that job when 8 GPUs are free). Tasks whose flavor has no head come last, in
    order. A generator: it reads the pass's reservations as the pass makes them."""
    waiting: dict[str, list[Job]] = {}
    heads: set[str] = set()
    for job in jobs:
        flavor = job.flavor
        if flavor not in heads and job.array_max_running is not None:
            waiting.setdefault(flavor, []).append(job)
            continue
        yield job
        if waiting.get(flavor) and (
            job.id in admit.reservations or flavor in admit.blocked_flavors
        ):
            heads.add(flavor)
            yield from waiting.pop(flavor)
    for tasks in waiting.values():
        yield from tasks


def estimate_start_t_s(
    state: ClusterState,
    job: Job,
    now_t_s: float,
    config: SchedulerConfig | None = None,
    cache: CycleCache | None = None,
) -> float | None:
    """Earliest time `job` could be placed if only running jobs held GPUs, cores and memory
    (`squeue --start`).

    Ignores quota and other pending jobs; None when no estimate exists (unknown run times).
    """
    config = config or SchedulerConfig()
    placement = PLACEMENT.get(config.placement)
    booked = _book(state, cache)
    shape = Shape.of(job)
    if placement.place(booked.snap, shape) is not None:
        return now_t_s
    estimates = _estimates(state, booked.quota, config)
    blockers = [
        Blocker(
            estimates.running_end_t_s(r, now_t_s),
            booked.run_masks[r.id],
            load=booked.run_loads.get(r.id),
        )
        for r in state.running
    ]
    found = earliest_start(booked.snap, shape, blockers, placement, now_t_s)
    return None if found is None else found[0]
