"""The preemption handshake on the virtual clock: checkpoint within the grace, or be killed."""

from __future__ import annotations

import pytest

from railyard.sched import Node
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.cluster import flat_queues
from railyard.sim.driver import SimConfig, Simulation
from railyard.sim.sweep import policy_config
from railyard.sim.workload import TraceJob, Workload

CKPT = CheckpointPolicy(rule=IntervalRule.FIXED, interval_s=100, cost_s=10, restart_s=20)


def run(grace_s: float):
    node = [Node("n0", "H100", 8, path=("su0", "su0-lg0"))]
    jobs = [
        TraceJob("low", 0.0, 8, 1000.0, queue="q", preemptible=True),
        TraceJob("high", 500.0, 8, 100.0, queue="q", priority=1000),
    ]
    # Fair-share ordering puts higher priority first; plain FIFO orders by submit time only, so
    # the requeued victim (keeping its submit time) would take the GPUs back.
    config = SimConfig(scheduler=policy_config("fairshare"), checkpoint=CKPT, grace_s=grace_s)
    queues = flat_queues(["q"], priority_preemption=True)  # priority preemption is opt-in
    return Simulation(node, Workload.of("p", jobs), config, queues).run()


def test_victim_checkpoints_within_the_grace_and_loses_nothing() -> None:
    """At 500 `low` has done 460 s of work (4 periods of 110 s, then 60 s). Signalled, it writes
    a checkpoint (10 s) and stops at 510; `high` runs 510-610; `low` restarts at 610, loads
    for 20 s and computes its last 540 s with 5 checkpoints: 630 + 540 + 50 = 1,220."""
    log = run(grace_s=120)
    low, high = log.records["low"], log.records["high"]
    assert (high.first_start_t_s, high.end_t_s) == (510.0, 610.0)
    assert (low.preemptions, low.restarts, low.end_t_s) == (1, 1, 1220.0)
    assert log.lost_gpu_s == 0.0


def test_victim_that_cannot_checkpoint_in_time_is_killed_and_loses_work() -> None:
    """With a 5 s grace the 10 s checkpoint cannot finish: killed at 505, it keeps the 400 s
    saved at 440 and loses 65 s of work (8 x 65 GPU-s)."""
    log = run(grace_s=5)
    assert log.records["high"].first_start_t_s == 505.0
    assert log.lost_gpu_s == pytest.approx(8 * 65)
    assert log.records["low"].end_t_s == pytest.approx(605 + 20 + 600 + 50)
