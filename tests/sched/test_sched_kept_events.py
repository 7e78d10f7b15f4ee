"""The running jobs' GPU release events kept between cycles (issue 56): after any walk of
starts, ends, restarts elsewhere, new objects, moving estimates and a clock that runs past
time limits, they equal the events derived afresh from the same blockers, for every flavor,
whether few or many nodes changed."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from sched_fakes import job, nodes

from railyard.sched import NodeState, RunningJob, StopCause
from railyard.sched.cache import Booking
from railyard.sched.events import node_events
from railyard.sched.limits import Estimates
from railyard.sched.reserve import all_ordered, base_events
from railyard.sched.snapshot import Snapshot, Topology

A100 = "A100-SXM-80GB"


def _inventory() -> list:
    states = {"n1": NodeState.DOWN}  # a node down: its claims are no events
    return nodes(6, states=states) + nodes(3, flavor=A100, prefix="m")


def _fresh(topo: Topology, run: list[RunningJob], flavor: str, now_t_s: float, end) -> tuple:
    booking = Booking(topo)
    booking.update(run)
    snap = Snapshot(topo, [f & ~u for f, u in zip(topo.full_mask, booking.used, strict=True)])
    return base_events(snap, flavor, booking.blockers(now_t_s, end))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("many", [False, True])
def test_kept_events_equal_events_derived_afresh(seed, many):
    rng = random.Random(seed)
    inventory = _inventory()
    topo = Topology(inventory)
    kept = Booking(topo)
    run: dict[str, RunningJob] = {}
    serial, now_t_s, moved = 0, 0.0, 0
    flavors = ["H100-SXM-80GB", A100]
    for step in range(40):
        now_t_s += rng.choice([1.0, 60.0, 900.0])
        for r in list(run.values()):
            roll = rng.random()
            if roll < (0.5 if many else 0.1):
                del run[r.id]
            elif roll < 0.2:
                run[r.id] = replace(r, stop_cause=StopCause.PREEMPTED)  # same GPUs, new object
        used = {(n, g) for r in run.values() for n, gs in r.placement.items() for g in gs}
        for r in list(run.values()):  # a job booked again on other GPUs, its end the same
            (name, gpus), *more = r.placement.items()
            free = [g for g in range(8) if (name, g) not in used]
            if not more and len(free) >= len(gpus) and rng.random() < 0.1:
                take = tuple(sorted(rng.sample(free, len(gpus))))
                used = (used - {(name, g) for g in gpus}) | {(name, g) for g in take}
                run[r.id] = replace(r, placement={name: take})
        for _ in range(rng.randrange(12 if many else 4)):
            node = rng.choice(inventory)
            free = [g for g in range(8) if (node.name, g) not in used]
            if not free:
                continue
            take = tuple(sorted(rng.sample(free, rng.randint(1, min(3, len(free))))))
            used |= {(node.name, g) for g in take}
            serial += 1
            j = job(f"j{serial}", gpus=len(take), walltime_s=rng.choice([None, 120.0, 3600.0]))
            j = replace(j, flavor=node.flavor)
            run[j.id] = RunningJob(j, {node.name: take}, now_t_s - rng.choice([0.0, 500.0]))
        # the history moves the ends of jobs without a limit of their own
        estimates = Estimates({}, {("a", None): rng.choice([60.0, 900.0])}, None, 30.0)
        end = estimates.running_end_t_s
        jobs = list(run.values())
        kept.update(jobs)
        blockers = kept.blockers(now_t_s, end)
        # a flavor is asked for only in some cycles: it catches up on what changed since
        for flavor in flavors if step % 3 else flavors[:1]:
            got = kept.events.of(flavor, blockers)
            want = _fresh(topo, jobs, flavor, now_t_s, end)
            assert got.ordered == want.ordered, (step, flavor)
            assert {i: list(e) for i, e in got.per_node.items() if e} == {
                i: list(e) for i, e in want.per_node.items() if e
            }
            moved += bool(got.ordered)
        if step % 2:  # the same jobs a while later: some limits passed, estimates moved
            later_t_s = now_t_s + rng.choice([1.0, 200.0])
            kept.update(jobs)
            again = kept.blockers(later_t_s, end)
            for flavor in flavors:
                got = kept.events.of(flavor, again)
                assert got.ordered == _fresh(topo, jobs, flavor, later_t_s, end).ordered
    assert moved > 20  # the walk did hold events most of the time


def test_a_gpu_comes_free_when_its_last_claim_ends():
    # two claims on one GPU (a running job and a reservation on it): the later end frees it
    ends, gpus = {"a": 10.0, "b": 20.0}, {"a": 0b011, "b": 0b110}
    assert node_events(ends, gpus) == ((10.0, 0b001), (20.0, 0b110))
    assert node_events({"a": float("inf"), "b": 5.0}, {"a": 0b1, "b": 0b1}) == (
        (float("inf"), 0b1),
    )


def _node_events_walked(ends, gpus):
    """`node_events` as the walk it was: latest claim first, each GPU to the first claim
    that holds it."""
    assigned, out = 0, []
    for t_s, m in sorted(zip(ends.values(), gpus.values(), strict=True), reverse=True):
        if m & ~assigned:
            out.append((t_s, m & ~assigned))
        assigned |= m
    return tuple(reversed(out))


def test_node_events_of_claims_on_distinct_gpus_equal_the_walk():
    """Claims that share no GPU (running jobs') are sorted at once: the same events as the
    walk, with ends shared, never-ending ones, an empty claim and shared GPUs mixed in."""
    rng = random.Random(11)
    inf = float("inf")
    fast = 0
    for _ in range(2000):
        gpus_left = list(range(8))
        rng.shuffle(gpus_left)
        ends, gpus = {}, {}
        for k in range(rng.randrange(1, 6)):
            take = [gpus_left.pop() for _ in range(min(len(gpus_left), rng.randrange(1, 3)))]
            m = sum(1 << g for g in take)
            if rng.random() < 0.05:
                m = rng.choice([0, 0b1])  # an empty claim, or one likely shared
            ends[f"j{k}"] = rng.choice([5.0, 10.0, inf, rng.uniform(0, 20)])
            gpus[f"j{k}"] = m
        union = 0
        for m in gpus.values():
            union |= m
        held = gpus.values()
        fast += 0 not in held and sum(map(int.bit_count, held)) == union.bit_count()
        assert node_events(ends, gpus) == _node_events_walked(ends, gpus), (ends, gpus)
    assert fast > 1500


def test_all_events_ordered_by_time_then_node_and_gpus_equal_the_tuples_sorted():
    """`reserve.all_ordered` sorts on the time alone and then each run of one time: the
    same list as sorting the tuples, with times shared across nodes (a gang) and on a node
    (two jobs ending at once), and never-ending GPUs left out."""
    rng = random.Random(5)
    for _ in range(200):
        per_node = {}
        for i in rng.sample(range(50), rng.randrange(1, 30)):
            per_node[i] = sorted(
                (rng.choice([math.inf, 10.0, 20.0, rng.uniform(0, 30)]), 1 << g)
                for g in rng.sample(range(8), rng.randrange(1, 5))
            )
        expected = sorted(
            (t_s, i, m) for i, events in per_node.items() for t_s, m in events if t_s < math.inf
        )
        assert all_ordered(per_node) == expected
