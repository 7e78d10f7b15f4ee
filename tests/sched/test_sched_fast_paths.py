"""The scheduler's fast paths against the plain computations they replace (issue 26, item 6):
each is checked on random inputs to give exactly what the plain one gives."""

from __future__ import annotations

import copy
import math
import pickle
import random

import pytest
from sched_fakes import H100, flat_queues, job, nodes, running, schedule, state

from railyard.sched import (
    Level,
    NodeState,
    Queue,
    TopologyMode,
    TopologyRequirement,
    Usage,
)
from railyard.sched.decisions import PreemptReason
from railyard.sched.holds import HoldBook
from railyard.sched.policies import ORDERING, PLACEMENT
from railyard.sched.policies.registry import OrderContext, in_order
from railyard.sched.quota import QuotaTree
from railyard.sched.reserve import Blocker, base_events, earliest_start, release_events
from railyard.sched.snapshot import Shape, Snapshot, Topology
from railyard.sched.victims import Candidate, _cheapest_freeing_gpus, _one_node, set_cost

LG = TopologyRequirement(Level.LEAF_GROUP, TopologyMode.REQUIRED)


def busy_snapshot(rng: random.Random, count: int = 12) -> tuple[Snapshot, list[int]]:
    """A snapshot of `count` 8-GPU nodes with random GPUs taken; the taken masks per node."""
    snap = Snapshot(Topology(nodes(count)))
    taken = [rng.randrange(256) for _ in range(count)]
    snap.take({i: m for i, m in enumerate(taken) if m})
    return snap, taken


def blockers_of(rng: random.Random, taken: list[int], n: int) -> list[Blocker]:
    """Blockers holding random parts of the taken GPUs (some shared, some never ending)."""
    out = []
    for _ in range(n):
        i = rng.randrange(len(taken))
        m = taken[i] & rng.randrange(1, 256)
        if m:
            end_t_s = rng.choice([100.0, 200.0, 300.0, 400.0, 500.0, math.inf])
            out.append(Blocker(end_t_s + rng.randrange(3), {i: m}))
    return out


def plain_earliest_start(snap, shape, blockers, placement, now_t_s):
    """Every instant's events freed on a full snapshot, placement tried at each."""
    scratch = snap.copy()
    for t_s, group in release_events(snap, shape.flavor, base_events(snap, shape.flavor, blockers)):
        scratch.release(group)
        if scratch.flavor_free.get(shape.flavor, 0) >= shape.gpus and scratch.may_fit(shape):
            found = placement.place(scratch, shape)
            if found is not None:
                return max(t_s, now_t_s), found
    return None


@pytest.mark.parametrize("placement_name", ["fabric-aware", "first-fit"])
def test_a_reservation_search_finds_what_a_snapshot_per_instant_finds(placement_name):
    """Gangs free, or bound to one node, leaf group or scalable unit (the search then waits
    for a group big enough before it tries a placement), on inventories of two to four nodes
    a leaf group, some down."""
    rng = random.Random(26)
    placement = PLACEMENT.get(placement_name)
    searched = found = 0
    for _ in range(400):
        count = 12
        inventory = nodes(count, per_lg=rng.choice([2, 3, 4]), lg_per_su=rng.choice([1, 2]),
                          states={f"n{rng.randrange(count)}": NodeState.DOWN}
                          if rng.random() < 0.2 else None)  # fmt: skip
        snap = Snapshot(Topology(inventory))
        taken = [rng.randrange(256) for _ in range(count)]
        snap.take({i: m for i, m in enumerate(taken) if m and snap.topo.ready[i]})
        taken = [m if snap.topo.ready[i] else 0 for i, m in enumerate(taken)]
        running = blockers_of(rng, taken, rng.randint(0, 30))
        extra = blockers_of(rng, taken, rng.randint(0, 4))
        gpw = rng.choice([1, 2, 4, 8])
        level = rng.choice([None, None, Level.NODE, Level.LEAF_GROUP, Level.SCALABLE_UNIT])
        shape = Shape(
            H100,
            rng.randint(1, 6),
            gpw,
            None if level is None else TopologyRequirement(level, TopologyMode.REQUIRED),
            rng.random() < 0.3,
        )
        base = base_events(snap, H100, running)
        fast = earliest_start(snap, shape, running, placement, 50.0, base=base, extra=extra)
        plain = plain_earliest_start(snap, shape, running + extra, placement, 50.0)
        assert fast == plain, (shape, running, extra)
        searched += 1
        found += fast is not None
    assert 0 < found < searched  # both outcomes were exercised


def test_a_moved_snapshot_equals_one_rebuilt_from_every_node():
    rng = random.Random(7)
    for _ in range(100):
        snap, _ = busy_snapshot(rng, count=16)
        free_mask = list(snap.free_mask)
        changed = rng.sample(range(16), rng.randint(0, 16))
        for i in changed:
            free_mask[i] = rng.randrange(256)
        moved = snap.moved(free_mask, changed + changed[:2], snap.free_cpu, snap.free_mem)
        rebuilt = Snapshot(snap.topo, free_mask, snap.free_cpu, snap.free_mem)
        for name in ("free_mask", "free", "buckets", "lg_hist", "su_hist", "flavor_free"):
            assert getattr(moved, name) == getattr(rebuilt, name), name
        assert snap.free_mask != free_mask or not changed or moved.free_mask == snap.free_mask


def test_usable_holds_are_those_a_scan_of_every_hold_finds():
    rng = random.Random(11)
    for _ in range(50):
        snap = Snapshot(Topology(nodes(8)))
        book = HoldBook(snap)
        for k in range(rng.randint(1, 12)):
            i = rng.randrange(8)
            free = snap.free_mask[i]
            t_s = rng.choice([-math.inf, 100.0, 200.0, 300.0])
            book.add(f"h{k}", H100, t_s, t_s + 50.0, {i: free & rng.randrange(256)})
            if rng.random() < 0.3:  # a job starts on part of what is held
                h = book.holds[rng.randrange(len(book.holds))]
                part = {j: m & rng.randrange(256) for j, m in h.held.items()}
                part = {j: m for j, m in part.items() if m}
                if part:
                    book.give(H100, part)
                    snap.take(part)
            for end_t_s in (50.0, 150.0, 250.0, 350.0):
                for preemptible in (False, True):
                    scan = 0
                    for k2 in book.lendable.get(H100, ()):
                        h = book.holds[k2]
                        if (h.held or h.held_load) and (preemptible or end_t_s <= h.t_s):
                            scan |= 1 << k2
                    assert book.usable(H100, end_t_s, preemptible) == scan


def nested_queues() -> list[Queue]:
    return [
        Queue("root"),
        Queue("o0", parent="root", nominal_gpus={H100: 4}),
        Queue("o1", parent="root", nominal_gpus={H100: 2}, lending_limit_gpus={H100: 1}),
        Queue("a", parent="o0", nominal_gpus={H100: 3}),
        Queue("b", parent="o0", nominal_gpus={H100: 1}, borrowing_limit_gpus={H100: 2}),
        Queue("c", parent="o1", nominal_gpus={H100: 4}),
        Queue("d", parent="o1", nominal_gpus={H100: 0}),
    ]


LEAVES = ["a", "b", "c", "d"]


def random_swap(rng: random.Random) -> tuple[QuotaTree, str, int, str, int]:
    """`nested_queues` with random use, and a victim (queue, GPUs) to swap for a preemptor."""
    tree = QuotaTree(nested_queues(), [H100])
    for q in LEAVES:
        tree.add(q, H100, rng.randint(0, 5))
    out_q, in_q = rng.choice(LEAVES), rng.choice(LEAVES)
    out_gpus = min(rng.randint(0, 3), tree.total.get((out_q, H100), 0))
    return tree, out_q, out_gpus, in_q, rng.randint(0, 3)


@pytest.mark.parametrize("reads_availability", [False, True])
def test_a_swap_what_if_answers_as_the_swapped_tree_and_leaves_the_tree_as_it_was(
    reads_availability,
):
    rng = random.Random(3)
    leaves = LEAVES
    for _ in range(200):
        tree, out_q, out_gpus, in_q, in_gpus = random_swap(rng)
        before = {q: tree.available(q, H100) for q in [*leaves, "o0", "o1"]}
        totals, used = dict(tree.total), dict(tree.used)

        def question(t: QuotaTree):
            reclaim = {(v, p): t.reclaimable(v, p, H100, 1) for v in leaves for p in leaves}
            if reads_availability:
                return reclaim, {q: t.available(q, H100) for q in leaves}
            return reclaim, None

        swapped = copy.deepcopy(tree)
        swapped.remove(out_q, H100, out_gpus)
        swapped.add(in_q, H100, in_gpus)
        expected = question(swapped)
        got = tree.ask_moved(out_q, out_gpus, in_q, in_gpus, H100, lambda t=tree: question(t))
        assert got == expected
        assert {k: v for k, v in tree.total.items() if v} == {k: v for k, v in totals.items() if v}
        assert {k: v for k, v in tree.used.items() if v} == {k: v for k, v in used.items() if v}
        assert {q: tree.available(q, H100) for q in before} == before


def test_a_moved_reclaim_answers_as_the_swapped_tree_without_moving_anything():
    """`reclaimable_moved` (would a victim, swapped out for its preemptor, take its quota
    back?) against the question asked of a tree that really has the two swapped."""
    rng = random.Random(5)
    for _ in range(300):
        tree, out_q, out_gpus, in_q, in_gpus = random_swap(rng)
        totals = dict(tree.total)
        gpus = rng.randint(1, 3)
        swapped = copy.deepcopy(tree)
        swapped.remove(out_q, H100, out_gpus)
        swapped.add(in_q, H100, in_gpus)
        expected = swapped.reclaimable(in_q, out_q, H100, gpus)
        assert tree.reclaimable_moved(out_q, out_gpus, in_q, in_gpus, H100, gpus) == expected
        assert tree.total == totals


def plain_one_node(shape: Shape, candidates: list[Candidate], snap: Snapshot):
    """Every node of the flavor scanned, its candidates sorted, the cheapest set kept."""
    best = None
    for i in range(len(snap.topo.nodes)):
        if not snap.topo.ready[i] or snap.topo.flavor[i] != shape.flavor:
            continue
        here = sorted((c for c in candidates if i in c.masks), key=lambda c: c.cost)
        chosen = _cheapest_freeing_gpus(here, i, snap.free[i], shape.gpus)
        if chosen and (best is None or (set_cost(chosen), i) < best[:2]):
            best = (set_cost(chosen), i, chosen)
    return None if best is None else best[2]


def test_the_one_node_victim_search_picks_what_a_scan_of_every_node_picks():
    """The search takes nodes off a heap by their cheapest candidate and stops once no node
    can beat the best set found; ties in lost work and start times are frequent here."""
    rng = random.Random(11)
    tree = QuotaTree(flat_queues({"a": 96}), [H100])
    for _ in range(300):
        snap = Snapshot(Topology(nodes(12)))
        candidates = []
        for k in range(rng.randint(1, 30)):
            i, size = rng.randrange(12), rng.choice([1, 1, 2, 4])
            first = rng.randrange(8 - size + 1)
            mask = ((1 << size) - 1) << first
            if snap.free_mask[i] & mask != mask:
                continue
            snap.take({i: mask})
            j = job(f"v{k}", gpus=size, preemptible=rng.random() < 0.7)
            start_t_s = rng.choice([0.0, 100.0, 200.0])
            run = running(j, f"n{i}:{first}-{first + size - 1}", start_t_s)
            lost = rng.choice([0.0, 50.0, 100.0]) * size
            cost = (0 if j.preemptible else 1, lost, 1, -start_t_s, run.id)
            candidates.append(
                Candidate(run, {i: mask}, PreemptReason.TIME_SLICE, lost, size, size, cost)
            )
        shape = Shape.of(job("p", gpus=rng.choice([1, 2, 4, 8])))
        expected = plain_one_node(shape, candidates, snap)
        found = _one_node(shape, candidates, snap, tree, lambda: {0: 1})
        assert (None if found is None else found[0]) == expected


@pytest.mark.parametrize("name", ["fifo", "priority", "fairshare", "las"])
def test_pending_jobs_sorted_part_by_part_come_in_the_order_of_the_policys_key(name):
    """The cycle sorts by a policy's rank, arrival and number in turn (stable sorts); the
    order must be the one its tuple key gives, ties in every part included."""
    rng = random.Random(17)
    policy = ORDERING.get(name)
    tree = QuotaTree(flat_queues({"a": 8, "b": 8, "c": 8}), [H100])
    for _ in range(60):
        pending = []
        for k in range(rng.randint(1, 80)):
            parent = rng.choice([None, "4", "12"])
            index = k if parent else None
            pending.append(
                job(
                    f"{parent}_{index}" if parent else str(k),
                    queue=rng.choice("abc"),
                    user=rng.choice(["u1", "u2", "u3"]),
                    priority=rng.choice([0, 0, 10, -5]),
                    submit_t_s=rng.choice([0.0, 1.0, 2.0, rng.random()]),
                    attained_gpu_s=rng.choice([0.0, 3600.0, 1e5, 1e7]),
                    array_parent=parent,
                    array_index=index,
                )
            )
        usage = Usage(
            queue_gpu_s={q: rng.choice([0.0, 1e5, 2e5]) for q in "abc"},
            user_gpu_s={(q, u): rng.uniform(0, 1e4) for q in "abc" for u in ("u1", "u2")},
        )
        ctx = OrderContext(0.0, usage, tree, pending, (3600.0, 36_000.0, 360_000.0))
        expected = sorted(pending, key=policy.sort_key(ctx))
        got = list(pending)
        in_order(got, policy, ctx)
        assert [j.id for j in got] == [j.id for j in expected]


def test_an_unpickled_job_shares_what_alike_jobs_share_and_is_decided_alike():
    """A sweep's worker process gets its jobs pickled: they must share `alike` with the jobs
    made there (the admission memo keys on its identity) and be decided the same."""
    pending = [
        job(f"j{k}", gpus=1 + k % 3, walltime_s=600.0, submit_t_s=float(k)) for k in range(40)
    ]
    s = state(nodes(4), flat_queues({"a": 32}), pending)
    copied = pickle.loads(pickle.dumps(s))
    assert copied.pending[0].alike is s.pending[0].alike
    assert copied.pending[0].alike is copied.pending[3].alike
    assert schedule(copied, 0.0) == schedule(s, 0.0)
