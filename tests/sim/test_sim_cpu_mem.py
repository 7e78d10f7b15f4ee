"""The simulator follows the scheduler's core and memory accounting: trace jobs carry their
cores and memory to `sched.Job`, and a node's declared cores decide who runs together."""

from __future__ import annotations

from pathlib import Path

import pytest

from railyard.sched import Node
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.driver import SimConfig, Simulation
from railyard.sim.sweep import policy_config
from railyard.sim.traces import TraceError, load_trace

TRACE = """id,submit_s,gpus,runtime_s,walltime_s,cpus,mem_gb
a,0,1,100,100,{cpus},8
b,1,1,50,50,{cpus},8
"""


def starts(tmp_path: Path, cpus: int) -> dict[str, float | None]:
    """Two 1-GPU jobs of `cpus` cores each on one 8-GPU node that declares 4 cores."""
    path = tmp_path / "cores.csv"
    path.write_text(TRACE.format(cpus=cpus))
    workload = load_trace(path, "railyard")
    node = Node("n0", "H100", 8, cpu_cores=4, mem_gb=64.0, path=("su0", "su0-lg0"))
    config = SimConfig(
        scheduler=policy_config("easy"), checkpoint=CheckpointPolicy(rule=IntervalRule.NONE)
    )
    log = Simulation([node], workload, config).run()
    assert {r.state for r in log.records.values()} == {"completed"}
    return {k: r.first_start_t_s for k, r in log.records.items()}


def test_jobs_whose_cores_do_not_fit_together_run_one_after_the_other(tmp_path: Path) -> None:
    assert starts(tmp_path, cpus=3) == {"a": 0.0, "b": 100.0}


def test_jobs_whose_cores_fit_together_run_together(tmp_path: Path) -> None:
    assert starts(tmp_path, cpus=2) == {"a": 0.0, "b": 1.0}


def test_railyard_trace_cpus_must_be_whole(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("id,submit_s,gpus,runtime_s,cpus\na,0,1,10,1.5\n")
    with pytest.raises(TraceError, match="cpus: must be a whole number"):
        load_trace(path, "railyard")
