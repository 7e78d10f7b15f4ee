"""Health checks in the twin: a node turns slow; the scheduler's checks on idle nodes (the
rule and timing of `sched.health`, as live) find it, take it out and, once repaired and
passing, put it back; jobs placed on it meanwhile run at its pace, so the policy shows in
goodput."""

from __future__ import annotations

from typing import Any

import pytest

from railyard.blueprint import load
from railyard.sched.health import HealthPolicy
from railyard.sched.model import Node
from railyard.sim.checkpoints import CheckpointPolicy
from railyard.sim.cluster import cluster_nodes
from railyard.sim.driver import SimConfig, Simulation
from railyard.sim.health import Degradation, HealthWorld
from railyard.sim.metrics import summarize
from railyard.sim.records import RunLog
from railyard.sim.sweep import policy_config
from railyard.sim.synthetic import generate

NODES: list[Node] = cluster_nodes(load("gaggle-h100").blueprint)
SLOW = NODES[3].name
HOUR = 3600.0


def run(health: HealthWorld | None, *, events: bool = False) -> tuple[dict[str, Any], RunLog]:
    workload = generate("llm-lab", jobs=150, cluster_gpus=96, load=1.0, seed=4)
    config = SimConfig(
        scheduler=policy_config("fairshare+easy"),
        checkpoint=CheckpointPolicy(cost_s=60, restart_s=300),
        health=health,
        record_events=events,
    )
    log = Simulation(NODES, workload, config).run()
    summary = summarize(log)
    summary.pop("series")
    return summary, log


def world(policy: HealthPolicy) -> HealthWorld:
    return HealthWorld(policy, (Degradation(2 * HOUR, SLOW, 0.5),), repair_s=4 * HOUR)


def test_a_slow_node_costs_goodput_until_health_checks_find_it() -> None:
    unchecked, quiet = run(HealthWorld(HealthPolicy(interval_s=None, gate_joins=False),
                                       (Degradation(2 * HOUR, SLOW, 0.5),)))  # fmt: skip
    checked, log = run(world(HealthPolicy(interval_s=HOUR, check_s=180)), events=True)
    assert quiet.health is not None
    assert log.health is not None
    assert quiet.health["checks"] == 0
    assert quiet.health["slowed_gpu_s"] > 0
    assert log.health["slow_nodes_found"] == 1
    assert log.health["checks"] > len(NODES)  # the gate at join, then hourly on idle nodes
    assert log.health["slowed_gpu_s"] < quiet.health["slowed_gpu_s"] / 2
    assert checked["goodput"] > unchecked["goodput"]
    assert log.health["check_gpu_s"] == pytest.approx(log.health["checks"] * 8 * 180)

    # the node's story, in order: found slow, drained, repaired, checked again, back
    story = [what for _, kind, what in log.event_log
             if kind in ("checked", "degrade", "admin") and SLOW in what]  # fmt: skip
    found = story.index(f"{SLOW} fail")
    assert f"{SLOW} drained" in story[found:]
    assert story[found + 1 :].count(f"{SLOW} pass") >= 1


def test_the_gate_checks_every_node_before_any_job_starts() -> None:
    _, log = run(world(HealthPolicy(interval_s=None, gate_joins=True, check_s=600)), events=True)
    first_start = min(t for t, kind, _ in log.event_log if kind == "start")
    assert first_start >= 600
    assert log.health is not None
    assert log.health["checks"] >= len(NODES)


def test_no_policy_no_checks_and_the_same_run_as_before() -> None:
    plain, log = run(None)
    assert log.health is None
    again, _ = run(HealthWorld(HealthPolicy(interval_s=None, gate_joins=False)))
    again.pop("health", None)
    assert again == plain
