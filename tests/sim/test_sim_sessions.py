"""Interactive sessions in the digital twin (issue 23): the trace columns ``interactive``,
``active_s`` and ``pool``, a queue's idle limit through the shared lifecycle, and a node pool
that keeps sessions off the training nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railyard.blueprint import load
from railyard.inventory import scheduler_nodes
from railyard.sim.cluster import flat_queues
from railyard.sim.driver import SimConfig, Simulation
from railyard.sim.sweep import policy_config
from railyard.sim.traces import TraceError, load_trace
from railyard.sim.workload import TraceJob, Workload
from tests.sim.test_sim_cli import APP

EXAMPLES = Path(__file__).parents[2] / "examples"
BLUEPRINT = EXAMPLES / "blueprints" / "gaggle-interactive.yaml"
SESSIONS = EXAMPLES / "traces" / "sessions.csv"


def test_the_example_blueprint_sets_its_evaluation_nodes_aside_as_a_pool() -> None:
    nodes = scheduler_nodes(load(BLUEPRINT).blueprint)
    flavors = {n.name: n.flavor for n in nodes}
    assert flavors["eval001"] == "RTX-6000-Ada-48GB@interactive"  # off the fabric, scheduled
    assert sum(n.gpus for n in nodes if n.flavor == "H100-SXM-80GB") == 96


def test_sessions_columns_round_trip_and_bad_values_name_line_and_field(tmp_path: Path) -> None:
    w = load_trace(SESSIONS, "railyard")
    s0 = next(j for j in w.jobs if j.id == "s0")
    assert (s0.interactive, s0.pool) == (True, "interactive")
    assert s0.active_s is not None
    assert 0 < s0.active_s <= s0.runtime_s
    t0 = next(j for j in w.jobs if j.id == "t0")
    assert (t0.interactive, t0.active_s, t0.pool) == (False, None, None)
    bad = tmp_path / "bad.csv"
    for row, where in [
        ("a,0,1,10,maybe,", ":2: interactive: not a boolean"),
        ("a,0,1,10,true,-3", ":2: active_s: must be"),
        ("a,0,1,10,false,30", ":2: active_s: only a session"),
    ]:
        bad.write_text(f"id,submit_s,gpus,runtime_s,interactive,active_s\n{row}\n")
        with pytest.raises(TraceError) as info:
            load_trace(bad, "railyard")
        assert str(info.value).startswith(f"{bad}{where}"), info.value


def _run(idle_limit_s: float | None) -> dict[str, str]:
    nodes = scheduler_nodes(load(BLUEPRINT).blueprint)
    jobs = [
        TraceJob("left-open", 0.0, 4, 10_000.0, queue="i", interactive=True, active_s=600.0,
                 pool="interactive"),
        TraceJob("used", 0.0, 4, 3_000.0, queue="i", interactive=True, pool="interactive"),
        TraceJob("next", 100.0, 8, 1_000.0, queue="i", interactive=True, pool="interactive"),
        TraceJob("train", 0.0, 96, 5_000.0, queue="t"),
    ]  # fmt: skip
    queues = flat_queues(["i", "t"], idle_limit_s=idle_limit_s)
    config = SimConfig(scheduler=policy_config("fifo"), record_events=True)
    log = Simulation(nodes, Workload.of("s", jobs), config, queues).run()
    return {
        job_id: f"{r.state}@{r.first_start_t_s:g}-{r.end_t_s:g}"
        for job_id, r in log.records.items()
        if r.first_start_t_s is not None and r.end_t_s is not None
    }


def test_an_idle_limit_frees_the_pool_for_the_next_session_and_spares_training() -> None:
    without, with_limit = _run(None), _run(1800.0)
    # The pool holds 8 GPUs: the 8-GPU session waits for both 4-GPU ones to end.
    assert without["next"] == "completed@10000-11000"
    assert with_limit["left-open"] == "timeout@0-2400"  # used for 600 s, then 1800 s idle
    assert with_limit["used"] == "completed@0-3000"  # active all along: never stopped
    assert with_limit["next"] == "completed@3000-4000"
    # Training runs on the 96 H100s, never on the pool, and no limit touches it.
    assert without["train"] == with_limit["train"] == "completed@0-5000"


def test_simulate_compares_idle_limits_on_the_example_trace() -> None:
    args = ["simulate", str(BLUEPRINT), "--trace", str(SESSIONS), "--policy", "fairshare+easy"]
    runs = []
    for extra in ([], ["--idle-limit", "30:00"]):
        result = CliRunner().invoke(APP, [*args, *extra, "--workers", "1", "--json"])
        assert result.exit_code == 0, result.output
        runs.append(json.loads(result.output)["runs"][0]["interactive"])
    without, limited = runs
    assert (without["jobs"], without["idle_stopped"]) == (60, 0)
    assert limited["idle_stopped"] > 0
    assert limited["held_gpu_h"] < without["held_gpu_h"]
    assert limited["queueing"]["mean_s"] < without["queueing"]["mean_s"]
