"""Booking running jobs: the reused topology index and the booking kept between cycles never
change a decision."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given
from sched_fakes import H100, flat_queues, job, nodes, running, schedule, state
from test_sched_properties import CONFIGS, NOW, SETTINGS, cluster_states

from railyard.sched import CycleCache, NodeState, RunningJob, SchedulerConfig, StopCause, cycle
from railyard.sched.cache import Booking, PendingOrder, RankedOrder, _fixed, by_arrival
from railyard.sched.cycle import _book
from railyard.sched.limits import Estimates
from railyard.sched.policies import ORDERING
from railyard.sched.policies.registry import OrderContext
from railyard.sched.quota import QuotaTree
from railyard.sched.snapshot import Snapshot, Topology


def booked_one_by_one(s):
    """The obvious way: a full snapshot, then take each running job's GPUs in turn."""
    topo = Topology(s.nodes)
    snap = Snapshot(topo)
    for r in sorted(s.running, key=lambda r: r.id):
        snap.take(topo.masks(r.placement))
    return snap


@SETTINGS
@given(cluster_states(), CONFIGS)
def test_cached_booking_matches_booking_from_scratch(s, config):
    cache = CycleCache()
    cold = cycle(s, NOW, config)
    first = cycle(s, NOW, config, cache)
    warm = cycle(s, NOW, config, cache)  # index and job masks now reused
    assert warm == first == cold
    fast, slow = _book(s, cache).snap, booked_one_by_one(s)
    assert fast.free_mask == slow.free_mask
    assert fast.buckets == slow.buckets
    assert fast.lg_hist == slow.lg_hist
    assert fast.su_hist == slow.su_hist
    assert fast.flavor_free == slow.flavor_free


def test_a_node_going_down_is_seen_although_the_index_is_reused():
    inventory = nodes(2)
    queues = flat_queues({"a": 64})
    big = [job("big", gpus=8, workers=2)]
    cache = CycleCache()
    assert [x.job_id for x in schedule(state(inventory, queues, big), cache=cache).starts] == [
        "big"
    ]
    inventory[1] = replace(inventory[1], state=NodeState.DOWN)
    assert schedule(state(inventory, queues, big), cache=cache).starts == ()


def test_a_restarted_job_is_booked_where_it_runs_now():
    inventory, queues = nodes(1), flat_queues({"a": 64})
    first = state(inventory, queues, [job("p", gpus=4)], [running(job("r", gpus=4), "n0:0-3")])
    cache = CycleCache()
    assert schedule(first, cache=cache).starts[0].placement == {"n0": (4, 5, 6, 7)}
    # same job id, new placement (requeued and started again): the old masks must not stick
    moved = state(inventory, queues, [job("p", gpus=4)], [running(job("r", gpus=4), "n0:4-7")])
    assert schedule(moved, cache=cache).starts[0].placement == {"n0": (0, 1, 2, 3)}


def test_one_gpu_booked_to_two_running_jobs_is_refused():
    run = [running(job("r1", gpus=2), "n0:0-1"), running(job("r2", gpus=2), "n0:1-2")]
    with pytest.raises(ValueError, match="double-booked on node n0"):
        schedule(state(nodes(1), flat_queues({"a": 64}), [job("p")], run))


def _booked(s, cache):
    b = _book(s, cache)
    return (b.snap.free_mask, b.snap.free_cpu, b.snap.free_mem, b.snap.buckets, b.quota.total,
            b.run_masks, b.run_loads, [r.id for r in b.running])  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_the_booking_kept_between_cycles_equals_one_made_afresh(seed):
    """A random walk of running sets (jobs start and end, move, get new objects for a stop
    asked or a checkpoint, nodes go down and come back): after every step the booking moved
    by the difference equals the one built from nothing."""
    rng = random.Random(seed)
    inventory = [replace(n, cpu_cores=64, mem_gb=512) for n in nodes(6)]
    queues = flat_queues({"a": 64, "b": 64})
    cache, run, serial = CycleCache(), {}, 0
    for _ in range(60):
        for r in list(run.values()):
            roll = rng.random()
            if roll < 0.15:
                del run[r.id]  # ended
            elif roll < 0.25:
                run[r.id] = replace(r, last_checkpoint_t_s=rng.random())  # same booking
            elif roll < 0.3:
                run[r.id] = replace(r, stop_cause=StopCause.PREEMPTED)
        used = {(n, g) for r in run.values() for n, gs in r.placement.items() for g in gs}
        for _ in range(rng.randrange(4)):
            node = rng.randrange(len(inventory))
            free = [g for g in range(8) if (f"n{node}", g) not in used]
            if not free:
                continue
            take = rng.sample(free, rng.randint(1, len(free)))
            used |= {(f"n{node}", g) for g in take}
            serial += 1
            new_id = rng.choice([f"j{serial}", *list(run)[:1]])  # sometimes a restart elsewhere
            if new_id in run:
                used -= {(n, g) for n, gs in run[new_id].placement.items() for g in gs}
            cores, mem_gb = rng.choice([0, 8]), rng.choice([0, 32])
            j = job(new_id, rng.choice("ab"), len(take), cpus_per_worker=cores,
                    mem_per_worker_gb=mem_gb)  # fmt: skip
            run[new_id] = RunningJob(j, {f"n{node}": tuple(sorted(take))}, 0.0)
        if rng.random() < 0.1:
            i = rng.randrange(len(inventory))
            flipped = NodeState.DOWN if inventory[i].state is NodeState.READY else NodeState.READY
            inventory[i] = replace(inventory[i], state=flipped)
        s = state(inventory, queues, [job("p", gpus=2)], list(run.values()))
        assert _booked(s, cache) == _booked(s, None)


def test_a_refused_booking_is_not_kept():
    inventory, queues, cache = nodes(1), flat_queues({"a": 64}), CycleCache()
    r1 = running(job("r1", gpus=2), "n0:0-1")
    good = state(inventory, queues, [job("p")], [r1])
    assert _booked(good, cache) == _booked(good, None)
    bad = state(inventory, queues, [job("p")], [r1, running(job("r2", gpus=2), "n0:1-2")])
    with pytest.raises(ValueError, match="double-booked on node n0"):
        _book(bad, cache)
    twice = state(inventory, queues, [job("p")], [r1, running(job("r1", gpus=1), "n0:5")])
    with pytest.raises(ValueError, match="job r1 is listed twice as running"):
        _book(twice, cache)
    fixed = state(inventory, queues, [job("p")], [running(job("r2", gpus=2), "n0:1-2")])
    assert _booked(fixed, cache) == _booked(fixed, None)


@pytest.mark.parametrize("seed", range(6))
def test_the_arrival_order_kept_between_cycles_equals_a_fresh_sort(seed):
    """Jobs arrive (some at one instant, some late with an early submit time: a requeue),
    leave, and are replaced by new objects (a hold released, a nomination): the order moved
    by the difference is the order sorted afresh, and a cycle decides the same with it."""
    rng = random.Random(seed)
    order, pending, serial = PendingOrder(), {}, 0
    for step in range(40):
        for j in list(pending.values()):
            roll = rng.random()
            if roll < 0.2:
                del pending[j.id]
            elif roll < 0.3:
                pending[j.id] = replace(j, nominated=not j.nominated)
        for _ in range(rng.choice([0, 1, 3, 100])):  # 100: more than are put in one by one
            serial += 1
            t_s = float(rng.choice([step, step, rng.randrange(step + 1)]))
            pending[f"j{serial}"] = job(f"j{serial}", rng.choice("ab"), rng.choice([1, 8]),
                                        submit_t_s=t_s, user=rng.choice(["ann", "bo"]))  # fmt: skip
        jobs = list(pending.values())
        rng.shuffle(jobs)
        assert order.update(jobs) == sorted(jobs, key=by_arrival)
        assert order.pairs == Counter((j.queue, j.user) for j in jobs)
    assert len(order.jobs) == len(pending)
    twice = [job("x", submit_t_s=2.0), job("x", submit_t_s=1.0)]
    assert order.update(twice) == sorted(twice, key=by_arrival)
    jobs = list(pending.values())
    assert order.update(jobs) == sorted(jobs, key=by_arrival)  # nothing of `twice` kept
    assert order.pairs == Counter((j.queue, j.user) for j in jobs)


def test_a_cycle_orders_the_same_with_the_kept_arrival_order():
    queues = flat_queues({"a": 8, "b": 8})
    pending = [job(f"j{i}", queue="ab"[i % 2], gpus=1 + i % 3, submit_t_s=float(i // 3),
                   priority=i % 2, nominated=i == 7) for i in range(30)]  # fmt: skip
    cache = CycleCache()
    for ordering in ("fifo", "priority", "fairshare", "las"):
        for starving_after_s in (7 * 86400.0, 36.0):  # 36 s: the jobs of t = 0-4 starve
            knobs = {"ordering": ordering, "starvation_limit_s": starving_after_s}
            for drop in range(3):
                s = state(nodes(1), queues, pending[drop:][::-1])
                assert schedule(s, 40.0, cache=cache, **knobs) == schedule(s, 40.0, **knobs)


@pytest.mark.parametrize("ordering", ["fifo", "priority", "las"])
def test_the_cycle_takes_jobs_in_the_documented_order(ordering):
    """Nominated jobs (by number), then starving ones (a job submitted exactly at the limit
    starves) by priority and arrival, then the rest by the policy: with four free GPUs and
    one-GPU jobs, the first four in that order start."""
    rng = random.Random(3)
    now_t_s, limit_s = 100.0, 60.0
    times = [10.0, 40.0, 40.0, 41.0, 70.0, 90.0]
    pending = [job(f"j{i}", submit_t_s=rng.choice(times), priority=rng.randrange(3),
                   nominated=i in (17, 4)) for i in range(24)]  # fmt: skip
    config = SchedulerConfig.of(ordering=ordering, backfill="none", preemption="off",
                                starvation_limit_s=limit_s)  # fmt: skip
    ctx_policy = ORDERING.get(ordering)
    s = state(nodes(1, gpus=4), flat_queues({"a": 64}), pending[::-1])
    starving_t_s = now_t_s - limit_s

    def rank(j):
        if j.nominated:
            return (0, j.tie)
        if j.submit_t_s <= starving_t_s:
            return (1, -j.priority, j.submit_t_s, j.tie)
        return (2,)

    first = sorted((j for j in pending if rank(j)[0] < 2), key=rank)
    rest = [j for j in pending if rank(j)[0] == 2]
    ctx = OrderContext(now_t_s, s.usage, QuotaTree(s.queues, {H100}), s.pending,
                       config.service_levels_gpu_s, config.time_slice_by)  # fmt: skip
    rest.sort(key=ctx_policy.sort_key(ctx))
    expected = {j.id for j in (first + rest)[:4]}
    result = cycle(s, now_t_s, config, CycleCache())
    assert {x.job_id for x in result.starts} == expected
    assert {x.job_id for x in cycle(s, now_t_s, config).starts} == expected


@pytest.mark.parametrize("seed", range(6))
def test_blockers_kept_between_cycles_equal_ones_derived_afresh(seed):
    """Time moves on; jobs with and without a time limit of their own (the latter from the
    queue's history, which moves), with an image still pulling (the limit starts later), start,
    end, run past their limit (then a kill is waited for) or get a new object: the kept
    blockers are those derived again from nothing at every cycle."""
    rng = random.Random(seed)
    inventory = nodes(4)
    topo = Topology(inventory)
    kept, run, serial, now_t_s = Booking(topo), {}, 0, 0.0
    for _ in range(50):
        now_t_s += rng.choice([1.0, 30.0, 600.0])
        for r in list(run.values()):
            roll = rng.random()
            if roll < 0.1:
                del run[r.id]
            elif roll < 0.2:
                run[r.id] = replace(r, run_t_s=now_t_s)  # its image arrived: the limit starts
        used = {(n, g) for r in run.values() for n, gs in r.placement.items() for g in gs}
        for _ in range(rng.randrange(3)):
            node = rng.randrange(4)
            free = [g for g in range(8) if (f"n{node}", g) not in used]
            if not free:
                continue
            g = rng.choice(free)
            used.add((f"n{node}", g))
            serial += 1
            walltime_s = rng.choice([None, 120.0, 3600.0])
            j = job(f"j{serial}", walltime_s=walltime_s, image=rng.choice([None, "img"]))
            run[j.id] = RunningJob(j, {f"n{node}": (g,)}, now_t_s - rng.choice([0.0, 500.0]))
        history = {("a", None): rng.choice([60.0, 900.0])}
        estimates = Estimates({}, history, None, 30.0)
        kept.update(list(run.values()))
        fresh = Booking(topo)
        fresh.update(list(run.values()))
        end = estimates.running_end_t_s
        assert list(kept.blockers(now_t_s, end)) == list(fresh.blockers(now_t_s, end))
        # only ends still ahead are kept: one passed (a job past its limit) is forgotten
        assert all(t_s > now_t_s for t_s in kept._ends.values())
        earlier_t_s = now_t_s - 700.0  # a clock set back (a test's, a replay's)
        fresh = Booking(topo)
        fresh.update(list(run.values()))
        assert list(kept.blockers(earlier_t_s, end)) == list(fresh.blockers(earlier_t_s, end))
        kept.blockers(now_t_s, end)


@pytest.mark.parametrize("seed", range(6))
def test_the_ranked_order_kept_between_cycles_equals_a_fresh_sort(seed):
    """Jobs arrive, leave and come back as new objects of another priority, a few or a burst
    at a time (more than are put in one by one), some cycles are not ranked at all (another
    ordering ran), the knobs change, and one id comes twice: the line kept in rank order is
    always the arrival order sorted afresh by the rank."""
    rng = random.Random(seed)
    order, ranked, pending, serial = PendingOrder(), RankedOrder(), {}, 0
    for step in range(60):
        for j in list(pending.values()):
            roll = rng.random()
            if roll < 0.1:
                del pending[j.id]
            elif roll < 0.15:
                pending[j.id] = replace(j, priority=rng.randrange(4))
        if rng.random() < 0.1:  # a burst leaves
            for j in rng.sample(list(pending.values()), k=len(pending) // 2):
                del pending[j.id]
        for _ in range(rng.choice([0, 1, 3, 100])):
            serial += 1
            t_s = float(rng.choice([step, step, rng.randrange(step + 1)]))
            pending[f"j{serial}"] = job(f"j{serial}", priority=rng.randrange(4), submit_t_s=t_s)
        jobs = list(pending.values())
        rng.shuffle(jobs)
        if rng.random() < 0.05:  # one id twice: nothing is kept, then all is ranked again
            order.update([*jobs, job(jobs[0].id)] if jobs else jobs)
        arrived = order.update(jobs)
        if rng.random() < 0.2:
            continue  # not ranked this cycle: the next one ranks everything again
        knobs = rng.choice([1, 1, 1, 3])  # the key: priority counted once or three times
        rank = lambda j, k=knobs: -(j.priority * k) % 5  # noqa: E731
        got = ranked.of(order, knobs, rank)
        assert got == sorted(arrived, key=rank)
        assert ranked.of(order, knobs, rank) is got  # nothing changed: kept as it is
        assert len(ranked._rank) == len(got)  # jobs gone are forgotten


def test_time_slicing_ranks_again_when_a_queue_limit_changes():
    """Under `las` by time left, a job without a limit of its own ranks by its queue's
    DefaultTime: with the ranks kept between cycles, a changed DefaultTime must still reorder
    (four free GPUs, the shorter four start)."""
    cache = CycleCache()
    pending = [job(f"s{i}", gpus=1, walltime_s=36_000.0, submit_t_s=float(i)) for i in range(4)]
    pending += [job(f"d{i}", gpus=1, submit_t_s=10.0 + i) for i in range(4)]  # DefaultTime
    knobs = {"ordering": "las", "backfill": "none", "preemption": "las"}  # by time left
    for default_s, first in ((360_000.0, "s"), (3600.0, "d"), (360_000.0, "s")):
        queues = [replace(q, default_time_s=default_s) if q.name == "a" else q
                  for q in flat_queues({"a": 64})]  # fmt: skip
        s = state(nodes(1, gpus=4), queues, pending)
        config = SchedulerConfig.of(**knobs)
        for c in (cache, None):
            started = {x.job_id[0] for x in cycle(s, 100.0, config, c).starts}
            assert started == {first}


@pytest.mark.parametrize("seed", range(4))
def test_running_ends_at_once_equal_one_by_one(seed):
    """`Estimates.running_ends_t_s` (a start's 73,500 blockers in one loop) gives exactly
    `running_end_t_s` of each: under a limit or not, pulling an image or running, before,
    at and past its end, with and without history."""
    rng = random.Random(seed)
    now_t_s = 10_000.0
    runs = []
    for k in range(300):
        walltime_s = rng.choice([None, 0.0, 120.0, 3600.0, 9_000.0, 10_000.0])
        j = job(f"j{k}", queue=rng.choice(["a", "b"]), walltime_s=walltime_s,
                image=rng.choice([None, "img"]))  # fmt: skip
        start_t_s = rng.choice([0.0, 1_000.0, now_t_s - 120.0, now_t_s, now_t_s + 5.0])
        r = RunningJob(j, {"n0": (0,)}, start_t_s)
        if rng.random() < 0.3:
            r = replace(r, run_t_s=start_t_s + rng.choice([0.0, 30.0]))
        runs.append(r)
    for history in ({}, {("a", None): 60.0}, {("a", None): 900.0, ("b", None): 0.0}):
        for default_s in (None, 300.0):
            estimates = Estimates({}, history, default_s, 30.0)
            for t_s in (now_t_s, now_t_s - 700.0, now_t_s + 3_600.0):
                one_by_one = [estimates.running_end_t_s(r, t_s) for r in runs]
                assert estimates.running_ends_t_s(runs, t_s) == one_by_one, t_s
                # and whether each end is kept until it passes, as the booking asks alone
                fixed = [_fixed(r, t_s) for r in runs]
                assert estimates.running_ends_fixed_t_s(runs, t_s) == (one_by_one, fixed)
                assert any(fixed)
                assert not all(fixed)


def test_blockers_with_ends_at_once_equal_one_by_one():
    """`Booking.blockers` with `ends_of` (as a cycle calls it) is the booking without."""
    topo = Topology(nodes(2))
    runs = [
        RunningJob(job(f"j{g}", walltime_s=[None, 120.0, 3600.0][g % 3]), {"n0": (g,)}, 50.0 * g)
        for g in range(8)
    ]
    estimates = Estimates({}, {("a", None): 200.0}, None, 30.0)
    for t_s in (100.0, 400.0, 5_000.0):
        one, at_once = Booking(topo), Booking(topo)
        one.update(runs)
        at_once.update(runs)
        end = estimates.running_end_t_s
        assert list(at_once.blockers(t_s, end, estimates.running_ends_fixed_t_s)) == list(
            one.blockers(t_s, end)
        )


def test_the_tuple_booked_last_is_not_walked_again_but_a_list_is():
    """A cycle's `ClusterState.running` is a tuple of frozen jobs: booked again, the same
    tuple books the same and is not walked (73,500 lookups a warm cycle). A list may have
    changed in place since: it is walked, and what left it is unbooked."""
    topo = Topology(nodes(2))
    runs = [running(job(f"j{g}", gpus=1), f"n0:{g}") for g in range(4)]
    booking = Booking(topo)
    walks = []

    class Counted(tuple):  # a tuple that counts the walks over it
        def __iter__(self):
            walks.append(1)
            return super().__iter__()

    given = Counted(runs)
    booking.update(given)
    assert walks
    assert booking.running == given
    walks.clear()
    booking.update(given)
    assert walks == []
    assert booking.running == given
    listed = list(runs)
    booking.update(listed)
    del listed[0]
    booking.update(listed)  # the same list, one job fewer
    assert [r.id for r in booking.running] == ["j1", "j2", "j3"]
    assert booking.used[0] == 0b1110


def _snapshot_fields(snap):
    return (snap.free_mask, snap.free, snap.free_cpu, snap.free_mem, snap.buckets,
            snap.lg_hist, snap.su_hist, snap.flavor_free)  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_the_booking_snapshot_moved_by_what_changed_equals_one_made_afresh(seed):
    """`Booking.snapshot` copies its last one and moves the nodes booked or freed since: as
    jobs start, end and get new objects (cores and memory too), each equals a snapshot made
    from the booking's free GPUs, cores and memory, and changing one never changes the next."""
    rng = random.Random(seed)
    inventory = [replace(n, cpu_cores=64, mem_gb=512.0) for n in nodes(6, gpus=8)]
    topo = Topology(inventory)
    booking = Booking(topo)
    free = {(n, g) for n in range(6) for g in range(8)}
    runs: dict[str, RunningJob] = {}
    for step in range(60):
        for r in list(runs.values()):
            if rng.random() < 0.2:  # it ends: its GPUs free again
                del runs[r.id]
                free |= {(int(name[1:]), g) for name, gs in r.placement.items() for g in gs}
        for k in range(rng.randrange(4)):
            take = rng.sample(sorted(free), min(len(free), rng.choice([1, 2, 4])))
            if not take:
                break
            free -= set(take)
            by_node: dict[str, list[int]] = {}
            for n, g in take:
                by_node.setdefault(f"n{n}", []).append(g)
            placement = {name: tuple(sorted(gs)) for name, gs in by_node.items()}
            j = job(f"s{step}-{k}", gpus=len(take), cpus_per_worker=rng.choice([0, 2]))
            runs[j.id] = RunningJob(j, placement, float(step))
        booking.update(tuple(runs.values()))
        snap = booking.snapshot()
        free_mask = [full & ~u for full, u in zip(topo.full_mask, booking.used, strict=True)]
        fresh = Snapshot(topo, free_mask, booking.free_cpu, booking.free_mem)
        assert _snapshot_fields(snap) == _snapshot_fields(fresh), step
        if snap.free_mask[0]:  # a cycle takes GPUs from its snapshot: the next is not moved
            snap.take({0: snap.free_mask[0] & -snap.free_mask[0]})


def test_the_pending_tuple_sorted_last_is_not_walked_again_but_a_list_is():
    """As the booking: the same tuple of pending jobs again is the same order, unwalked; a
    list may have changed in place and is walked; a tuple with an id twice is never kept."""
    order = PendingOrder()
    walks = []

    class Counted(tuple):  # a tuple that counts the walks over it
        def __iter__(self):
            walks.append(1)
            return super().__iter__()

    jobs = [job(f"p{k}", submit_t_s=float(10 - k)) for k in range(5)]
    given = Counted(jobs)
    first = order.update(given)
    assert [j.id for j in first] == ["p4", "p3", "p2", "p1", "p0"]
    walks.clear()
    assert order.update(given) is first
    assert walks == []
    listed = list(jobs)
    order.update(listed)
    del listed[0]
    assert [j.id for j in order.update(listed)] == ["p4", "p3", "p2", "p1"]
    twice = Counted([*jobs, jobs[0]])
    assert len(order.update(twice)) == 6
    assert len(order.update(twice)) == 6  # not the (empty) kept order
