"""Random failures: seeded, reproducible, and they cost goodput."""

from __future__ import annotations

from railyard.blueprint import load
from railyard.sim.checkpoints import CheckpointPolicy
from railyard.sim.cluster import cluster_nodes
from railyard.sim.driver import SimConfig, Simulation
from railyard.sim.failures import FailureModel, FailureProcess
from railyard.sim.metrics import summarize
from railyard.sim.sweep import policy_config
from railyard.sim.synthetic import generate
from railyard.twin.checkpoint import FAILURES_PER_GPU_HOUR


def run(seed: int, per_gpu_hour: float) -> dict[str, object]:
    nodes = cluster_nodes(load("gaggle-h100").blueprint)
    workload = generate("llm-lab", jobs=150, cluster_gpus=96, load=1.0, seed=4)
    config = SimConfig(
        scheduler=policy_config("fairshare+easy"),
        checkpoint=CheckpointPolicy(cost_s=60, restart_s=300),
        failures=FailureModel(per_gpu_hour=per_gpu_hour, repair_median_s=3600),
        seed=seed,
    )
    summary = summarize(Simulation(nodes, workload, config).run())
    summary.pop("series")
    return summary


def test_default_rate_is_llama3() -> None:
    assert FailureModel().per_gpu_hour == FAILURES_PER_GPU_HOUR
    assert abs(FAILURES_PER_GPU_HOUR - 419 / (54 * 24 * 16384)) < 1e-15


def test_failures_are_reproducible_and_cost_goodput() -> None:
    often = 100 * FAILURES_PER_GPU_HOUR  # one failure per ~2.6 node-days, to see many
    a, b = run(1, often), run(1, often)
    assert a == b
    assert a["node_failures"] > 0
    assert a["restarts"] > 0
    assert a["goodput"] < 1.0
    assert a["lost_gpu_h"] > 0
    assert run(2, often) != a
    calm = run(1, 0.0)
    assert calm["node_failures"] == 0
    assert calm["goodput"] > a["goodput"]


def test_failure_process_is_seeded() -> None:
    nodes = [("n0", 8), ("n1", 8)]
    one = FailureProcess(FailureModel(), nodes, seed=3)
    two = FailureProcess(FailureModel(), nodes, seed=3)
    assert [one.next_failure_t_s("n0", 0) for _ in range(5)] == [
        two.next_failure_t_s("n0", 0) for _ in range(5)
    ]
    assert FailureProcess(FailureModel(random_failures=False), nodes, 0).next_failure_t_s(
        "n0", 0
    ) == float("inf")
