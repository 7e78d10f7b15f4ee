"""Booking running jobs: the reused topology index and job masks never change a decision."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from sched_fakes import flat_queues, job, nodes, running, schedule, state
from test_sched_properties import CONFIGS, NOW, SETTINGS, cluster_states

from railyard.sched import CycleCache, NodeState, cycle
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
