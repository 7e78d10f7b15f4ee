"""Cold starts in the twin: a job waits for its image on nodes that lack it (GPUs held, time
limit not running), the next one goes where the image is, and a what-if shows the cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railyard.sched import Node
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.driver import RunLog, SimConfig, Simulation
from railyard.sim.images import GB, ImageWorld, parse_image_size
from railyard.sim.metrics import summarize
from railyard.sim.sweep import policy_config
from railyard.sim.workload import TraceJob, Workload
from tests.sim.test_sim_cli import APP

NEMO = "nvcr.io/nvidia/nemo:24.05"
WORLD = ImageWorld({NEMO: 25 * GB}, link_gbps=100.0, registry_gbps=100.0)  # 2 s a node


def test_pull_time_is_bytes_over_the_slower_link():
    assert WORLD.pull_s(NEMO, 1) == pytest.approx(2.0)  # 200 Gb over 100 Gb/s
    assert WORLD.pull_s(NEMO, 4) == pytest.approx(8.0)  # four nodes share the registry
    assert WORLD.pull_s(NEMO, 0) == 0.0
    slow = ImageWorld({NEMO: 25 * GB}, link_gbps=10.0, registry_gbps=400.0, latency_s=3.0)
    assert slow.pull_s(NEMO, 2) == pytest.approx(23.0)
    assert ImageWorld(default_size_bytes=5 * GB).pull_s("other:1", 1) == pytest.approx(0.4)
    assert parse_image_size("a/b:1=2.5") == ("a/b:1", 2.5 * GB)
    with pytest.raises(ValueError, match="NAME=GB"):
        parse_image_size("a/b:1")
    with pytest.raises(ValueError, match="link_gbps"):
        ImageWorld(link_gbps=0)


def four_nodes() -> list[Node]:
    return [Node(f"n{i}", "H100", 8, path=("su0", f"su0-lg{i}")) for i in range(4)]


def run(jobs: list[TraceJob], images: ImageWorld | None = WORLD) -> RunLog:
    config = SimConfig(
        scheduler=policy_config("fifo"),
        checkpoint=CheckpointPolicy(rule=IntervalRule.NONE),
        cycle_interval_s=1.0,
        images=images,
    )
    return Simulation(four_nodes(), Workload.of("images", jobs), config).run()


def test_a_cold_start_waits_for_the_pull_and_the_next_job_goes_where_the_image_is():
    jobs = [
        TraceJob("a", 0.0, 8, 100.0, image=NEMO),
        TraceJob("b", 500.0, 8, 100.0, image=NEMO),  # every node free: n0 holds the image
        TraceJob("c", 500.5, 16, 100.0, image=NEMO),  # n0 taken: two nodes pull at once
    ]
    log = run(jobs)
    a, b, c = (log.records[k] for k in "abc")
    assert a.end_t_s == pytest.approx(a.first_start_t_s + 2.0 + 100.0)
    assert (a.cold_starts, b.cold_starts, c.cold_starts) == (1, 0, 1)
    assert b.end_t_s == pytest.approx(b.first_start_t_s + 100.0)
    assert c.pull_s == pytest.approx(4.0)  # 200 Gb twice over the registry's 100 Gb/s
    summary = summarize(log)["images"]
    assert summary["cold_starts"] == 2
    assert summary["pull_s_mean"] == pytest.approx(3.0)
    assert summary["pull_gpu_h"] == pytest.approx((8 * 2.0 + 16 * 4.0) / 3600)
    bare = run([TraceJob(j.id, j.submit_s, j.gpus, j.runtime_s) for j in jobs])
    assert summarize(bare)["images"] is None
    assert summarize(bare)["allocated_gpu_h"] < summarize(log)["allocated_gpu_h"]


def test_the_pull_does_not_count_against_the_time_limit():
    big = ImageWorld({NEMO: 250 * GB})  # 20 s
    log = run([TraceJob("a", 0.0, 8, 95.0, walltime_s=100.0, image=NEMO)], big)
    assert log.records["a"].state == "completed"
    assert log.records["a"].end_t_s == pytest.approx(log.records["a"].first_start_t_s + 115.0)
    over = run([TraceJob("b", 0.0, 8, 150.0, walltime_s=100.0, image=NEMO)], big)
    assert over.records["b"].state == "timeout"


def test_a_what_if_shows_cold_starts(tmp_path: Path):
    trace = tmp_path / "t.csv"
    trace.write_text(
        "id,submit_s,gpus,runtime_s,image\n"
        f"a,0,8,3600,{NEMO}\nb,10,8,3600,{NEMO}\nc,7200,8,3600,{NEMO}\nd,20,8,3600,\n"
    )
    args = ["simulate", "gaggle-h100", "--trace", str(trace), "--policy", "fifo"]
    sized = [*args, "--image-size", f"{NEMO}=25", "--image-link-gbps", "25"]
    result = CliRunner(env={"COLUMNS": "160"}).invoke(APP, [*sized, "--json"])
    assert result.exit_code == 0, result.output
    images = json.loads(result.output)["runs"][0]["images"]
    assert images["jobs"] == 3
    assert images["cold_starts"] == 2  # a and b on two nodes; c reuses one of them
    assert images["pull_s_mean"] == pytest.approx(8.0)  # 200 Gb over a 25 Gb/s port
    table = CliRunner(env={"COLUMNS": "160"}).invoke(APP, sized)
    assert "container images (trace column image)" in table.output
    bad = CliRunner().invoke(APP, [*args, "--image-size", f"{NEMO}"])
    assert bad.exit_code == 2
    assert "--image-size" in bad.output.strip().splitlines()[0]
