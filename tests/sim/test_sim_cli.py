"""`railyard simulate` as a user runs it: tables, JSON, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from railyard.cli.simulate import register
from railyard.sim import plots, sweep

FIXTURES = Path(__file__).parent / "fixtures"
runner = CliRunner(env={"COLUMNS": "160"})


def make_app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command()
    def other() -> None:  # a second command keeps `simulate` a subcommand, as in `railyard`
        """Unused."""

    return app


APP = make_app()


def test_trace_side_by_side_json() -> None:
    args = ["simulate", "gaggle-h100", "--trace", str(FIXTURES / "railyard_trace.csv")]
    result = runner.invoke(APP, [*args, "--policy", "fifo,easy", "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.output)["runs"]
    assert [r["policy"] for r in runs] == ["fifo", "easy"]
    assert all(r["states"] == {"completed": 4} for r in runs)


def test_synthetic_table() -> None:
    args = ["simulate", "gaggle-h100", "--synthetic", "philly", "--jobs", "60", "--seeds", "2"]
    result = runner.invoke(APP, [*args, "--policy", "fifo,fairshare+easy", "--failures"])
    assert result.exit_code == 0, result.output
    assert "synthetic-philly on gaggle-h100 (96 GPUs)" in result.output
    assert result.output.count("fairshare+easy") >= 2


def test_gavel_gangs_of_one_node_and_the_time_slicing_defaults() -> None:
    args = ["simulate", "gaggle-h100", "--synthetic", "gavel", "--jobs", "80", "--max-gpus", "8"]
    result = runner.invoke(APP, [*args, "--policy", "las", "--preemptible-jobs", "--json"])
    assert result.exit_code == 0, result.output
    run = json.loads(result.output)["runs"][0]
    assert run["jobs"] == 80
    assert run["gangs_8_plus"]["jct"]["jobs"] >= 1
    assert set(run["by_size"]) <= {"1", "2-8"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--synthetic", "philly", "--policy", "lottery"], "--policy: unknown ['lottery']"),
        (["--synthetic", "nope"], "--synthetic: unknown profile 'nope'"),
        ([], "give exactly one of --trace FILE or --synthetic PROFILE"),
        (["--trace", "/no/such.csv"], "/no/such.csv:0: file: no such file"),
        (["--synthetic", "philly", "--checkpoint", "often"], "--checkpoint: 'often'"),
        (["--synthetic", "philly", "--service-levels", "24,1"], "--service-levels: give incr"),
        (["--synthetic", "philly", "--service-levels", "a"], "--service-levels: 'a' is not"),
        (["--synthetic", "philly", "--victim-searches", "0"], "--victim-searches: must be"),
        (["--synthetic", "philly", "--greedy-hold", "soon"], "--greedy-hold: bad time"),
        (["--synthetic", "philly", "--quantum", "-1"], "--quantum: must be >= 0"),
        (["--synthetic", "philly", "--time-slice-by", "age"], "--time-slice-by: 'age' is unk"),
        (["--synthetic", "philly", "--starved-unsliced", "soon"], "--starved-unsliced: bad"),
        (["--synthetic", "philly", "--starvation-limit", "0:00"], "--starvation-limit: must be"),
        (["--synthetic", "gavel", "--max-gpus", "0"], "--max-gpus: 0 is not a gang size"),
        (["--trace", "t.csv", "--max-gpus", "8"], "--max-gpus: shapes synthetic jobs only"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(APP, ["simulate", "gaggle-h100", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert message in lines[0]


def test_bad_trace_row_names_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text("id,submit_s,gpus,runtime_s\na,0,8,abc\n")
    result = runner.invoke(APP, ["simulate", "gaggle-h100", "--trace", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:2: runtime_s: not a number" in result.output


def test_unknown_blueprint() -> None:
    result = runner.invoke(APP, ["simulate", "no-such-preset", "--synthetic", "philly"])
    assert result.exit_code == 2


def test_plot_without_matplotlib_is_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("railyard.cli.simulate.have_matplotlib", lambda: False)
    result = runner.invoke(
        APP, ["simulate", "gaggle-h100", "--synthetic", "philly", "--plot", "out"]
    )
    assert result.exit_code == 2
    assert "pip install matplotlib" in result.output


@pytest.mark.skipif(not plots.have_matplotlib(), reason="matplotlib is an optional extra")
def test_plots_are_written(tmp_path: Path) -> None:
    args = ["simulate", "gaggle-h100", "--synthetic", "philly", "--jobs", "50"]
    result = runner.invoke(APP, [*args, "--policy", "fifo", "--plot", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert {p.name for p in tmp_path.iterdir()} == {"utilization.png", "queue.png", "jct_cdf.png"}


def test_ray_missing_is_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("railyard.cli.simulate.ray_available", lambda: False)
    result = runner.invoke(
        APP, ["simulate", "gaggle-h100", "--synthetic", "philly", "--ray", "auto"]
    )
    assert result.exit_code == 2
    assert "pip install ray" in result.output


def test_process_sweep_matches_in_process_runs() -> None:
    scenarios = [
        sweep.Scenario("gaggle-h100", p, seed=1, synthetic="helios", jobs=80)
        for p in ("fifo", "fairshare+easy")
    ]
    parallel = sweep.sweep(scenarios, workers=2)
    serial = sweep.sweep(scenarios, workers=1)
    assert [r["jct"] for r in parallel] == [r["jct"] for r in serial]


@pytest.mark.parametrize(("extra", "noted"), [([], True), (["--preemptible-jobs"], False)])
def test_las_without_preemptible_jobs_says_it_is_greedy(extra: list[str], noted: bool) -> None:
    """LAS can only slice preemptible jobs; a run with none would silently equal fifo-greedy."""
    args = ["simulate", "gaggle-h100", "--trace", str(FIXTURES / "railyard_trace.csv")]
    result = runner.invoke(APP, [*args, "--policy", "las", "--workers", "1", *extra])
    assert result.exit_code == 0, result.output
    assert ("las slices only preemptible jobs" in result.output) is noted


def test_health_checks_find_a_slow_node() -> None:
    args = ["simulate", "gaggle-h100", "--synthetic", "llm-lab", "--jobs", "60", "--load", "1",
            "--seed", "4", "--policy", "fairshare+easy", "--slow-node", "dgx004@1=0.5",
            "--json"]  # fmt: skip
    unchecked = runner.invoke(APP, args)
    checked = runner.invoke(APP, [*args, "--health-interval", "1h"])
    assert unchecked.exit_code == 0, unchecked.output
    assert checked.exit_code == 0, checked.output
    [blind] = json.loads(unchecked.output)["runs"]
    [seeing] = json.loads(checked.output)["runs"]
    assert blind["health"]["checks"] == 0
    assert blind["health"]["mean_detection_s"] is None
    assert seeing["health"]["slow_nodes_found"] == 1
    assert seeing["health"]["slowed_gpu_s"] < blind["health"]["slowed_gpu_s"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--slow-node", "dgx004"], "--slow-node: 'dgx004' is not NODE@HOURS=SPEED"),
        (["--slow-node", "n9@1=0.5"], "--slow-node: no node 'n9' in gaggle-h100"),
        (["--slow-node", "dgx004@1=1.5"], "is not NODE@HOURS=SPEED"),
        (["--health-interval", "soon"], "--health-interval: bad duration 'soon'"),
        (["--health-interval", "1h", "--health-fail", "reboot"], "--health-fail: 'reboot'"),
    ],
)
def test_bad_health_flags(flags: list[str], message: str) -> None:
    args = ["simulate", "gaggle-h100", "--synthetic", "philly", "--jobs", "5", *flags]
    result = runner.invoke(APP, args)
    assert result.exit_code == 2
    assert message in result.output


def test_scheduler_knobs_reach_the_simulated_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    """--quantum, --service-levels, --victim-searches(-per-queue), --greedy-hold,
    --time-slice-by, --starved-unsliced, --unsliced-after, --slice-level-gap,
    --unsliced-after-restarts,
    --no-starving-slices and
    --starvation-limit become the run's SchedulerConfig fields, over the policy's own."""
    seen = []
    real = sweep.policy_config

    def spy(name: str, **overrides: object) -> object:
        config = real(name, **overrides)
        seen.append(config)
        return config

    monkeypatch.setattr(sweep, "policy_config", spy)
    args = ["simulate", "gaggle-h100", "--trace", str(FIXTURES / "railyard_trace.csv")]
    knobs = ["--quantum", "360", "--service-levels", "1,2,4,8", "--victim-searches", "64",
             "--victim-searches-per-queue", "4", "--greedy-hold", "none",
             "--time-slice-by", "attained", "--starved-unsliced", "6:00:00",
             "--unsliced-after", "2-00:00:00", "--slice-level-gap", "2",
             "--unsliced-after-restarts", "9",
             "--no-starving-slices", "--starvation-limit", "3-12"]  # fmt: skip
    result = runner.invoke(APP, [*args, *knobs, "--policy", "las", "--workers", "1"])
    assert result.exit_code == 0, result.output
    [config] = seen
    assert config.time_slice_quantum_s == 360.0
    assert config.service_levels_gpu_s == (3600.0, 7200.0, 14400.0, 28800.0)
    assert (config.preemption_searches_per_cycle, config.preemption_searches_per_queue) == (64, 4)
    assert config.greedy_hold_after_s is None
    assert (config.time_slice_by, config.starved_unsliced_s) == ("attained", 6 * 3600.0)
    assert config.unsliced_after_s == 2 * 86_400
    assert config.slice_level_gap == 2
    assert config.unsliced_after_restarts == 9
    assert config.starving_slices is False
    assert config.starvation_limit_s == 3.5 * 86_400
