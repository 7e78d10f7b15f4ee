"""Booking running jobs: the reused topology index and the booking kept between cycles never
change a decision."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given
from sched_fakes import flat_queues, job, nodes, running, schedule, state
from test_sched_properties import CONFIGS, NOW, SETTINGS, cluster_states

from railyard.sched import CycleCache, NodeState, RunningJob, StopCause, cycle
from railyard.sched.cycle import _book
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
