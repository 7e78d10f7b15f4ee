"""The scheduler's fast paths against the plain computations they replace (issue 26, item 6):
each is checked on random inputs to give exactly what the plain one gives."""

from __future__ import annotations

import copy
import math
import pickle
import random

import pytest
from sched_fakes import H100, flat_queues, job, nodes, schedule, state

from railyard.sched import Level, Queue, SchedulerConfig, TopologyMode, TopologyRequirement
from railyard.sched.holds import HoldBook
from railyard.sched.policies import PLACEMENT
from railyard.sched.quota import QuotaTree
from railyard.sched.reserve import Blocker, base_events, earliest_start, release_events
from railyard.sched.snapshot import Shape, Snapshot, Topology

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


def test_a_reservation_search_finds_what_a_snapshot_per_instant_finds():
    rng = random.Random(26)
    placement = PLACEMENT.get(SchedulerConfig().placement)
    searched = found = 0
    for _ in range(300):
        snap, taken = busy_snapshot(rng)
        running = blockers_of(rng, taken, rng.randint(0, 30))
        extra = blockers_of(rng, taken, rng.randint(0, 4))
        gpw = rng.choice([1, 2, 4, 8])
        shape = Shape(
            H100,
            rng.randint(1, 6),
            gpw,
            LG if rng.random() < 0.3 else None,
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


@pytest.mark.parametrize("reads_availability", [False, True])
def test_a_swap_what_if_answers_as_the_swapped_tree_and_leaves_the_tree_as_it_was(
    reads_availability,
):
    rng = random.Random(3)
    leaves = ["a", "b", "c", "d"]
    for _ in range(200):
        tree = QuotaTree(nested_queues(), [H100])
        for q in leaves:
            tree.add(q, H100, rng.randint(0, 5))
        before = {q: tree.available(q, H100) for q in [*leaves, "o0", "o1"]}
        totals, used = dict(tree.total), dict(tree.used)
        out_q, in_q = rng.choice(leaves), rng.choice(leaves)
        out_gpus, in_gpus = rng.randint(0, 3), rng.randint(0, 3)
        out_gpus = min(out_gpus, tree.total.get((out_q, H100), 0))

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
