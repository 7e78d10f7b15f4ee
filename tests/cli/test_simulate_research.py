"""`railyard simulate` for researchers (issue 56 item 6), as a user runs it: a flat cluster
from flags, --load on a trace, --jobs-out, --measure-jobs, Gavel's format and the fairness
baselines; bad input is one line and exit 2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from railyard.cli.simulate import register

ROOT = Path(__file__).resolve().parents[2]
GAVEL = str(ROOT / "examples" / "traces" / "gavel_small.trace")
runner = CliRunner(env={"COLUMNS": "160"})


def make_app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command()
    def other() -> None:  # a second command keeps `simulate` a subcommand, as in `railyard`
        """Unused."""

    return app


APP = make_app()


def runs(*args: str) -> list[dict]:
    result = runner.invoke(APP, ["simulate", *args, "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["runs"]


def contended_trace(path: Path, *, apart_s: float = 600.0) -> Path:
    """20 jobs of 32 GPUs for an hour, one every `apart_s`: load 2.0 on 96 GPUs at 600 s."""
    rows = [f"j{i},{i * apart_s},32,3600" for i in range(20)]
    path.write_text("id,submit_s,gpus,runtime_s\n" + "\n".join(rows) + "\n")
    return path


def test_a_flat_cluster_from_flags():
    (run,) = runs("--nodes", "2", "--gpus-per-node", "4", "--gpu", "a100",
                  "--trace", GAVEL, "--format", "gavel", "--policy", "fifo")  # fmt: skip
    assert run["gpus"] == 8
    assert run["blueprint"] == "flat-2x4-A100-SXM-80GB"
    assert run["states"] == {"completed": 12}


def test_load_rescales_a_trace(tmp_path: Path):
    """The bug: --load on a trace was silently ignored (the same JCT at --load 2.0)."""
    trace = str(contended_trace(tmp_path / "t.csv"))
    base = ["gaggle-h100", "--trace", trace, "--policy", "fifo"]
    (asis,) = runs(*base)
    (light,) = runs(*base, "--load", "0.2")
    (same,) = runs(*base, "--load", "2.0")
    assert asis["jct"]["mean_s"] > 2 * 3600.0
    assert light["jct"]["mean_s"] == pytest.approx(3600.0)  # nobody waits at load 0.2
    assert asis["offered_load"] == pytest.approx(2.0)
    assert light["offered_load"] == pytest.approx(0.2)
    assert same["jct"]["mean_s"] == pytest.approx(asis["jct"]["mean_s"])


def test_jobs_out_writes_a_row_per_job_per_run(tmp_path: Path):
    out = tmp_path / "jobs.csv"
    args = ["--nodes", "1", "--trace", GAVEL, "--format", "gavel", "--policy", "fifo,maxmin"]
    result = runner.invoke(APP, ["simulate", *args, "--jobs-out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24
    assert {r["policy"] for r in rows} == {"fifo", "maxmin"}
    first = rows[0]
    assert set(first) >= {"id", "user", "queue", "gpus", "submit_s", "start_s", "end_s",
                          "jct_s", "wait_s", "preemptions", "restarts", "lost_gpu_s"}  # fmt: skip
    assert float(first["jct_s"]) == pytest.approx(float(first["end_s"]) - float(first["submit_s"]))


def test_measure_jobs_and_the_baselines():
    found = runs("--nodes", "1", "--trace", GAVEL, "--format", "gavel",
                 "--policy", "maxmin,ftf", "--measure-jobs", "2:10")  # fmt: skip
    assert [r["policy"] for r in found] == ["maxmin", "ftf"]
    assert all(r["jobs"] == 8 and r["measured"] == {"first": 2, "end": 10} for r in found)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gaggle-h100", "--nodes", "2", "--synthetic", "philly"], "give a blueprint or --nodes"),
        (["--synthetic", "philly"], "give a blueprint or --nodes"),
        (["--nodes", "0", "--synthetic", "philly"], "--nodes 0 --gpus-per-node 8: both must"),
        (["--nodes", "2", "--gpu", "V100", "--synthetic", "philly"], "--gpu: 'V100' is no GPU"),
        (["--nodes", "2", "--synthetic", "philly", "--load", "0"], "--load: 0.0 is not a load"),
        (["--nodes", "2", "--synthetic", "philly", "--measure-jobs", "9:3"], "--measure-jobs:"),
        (
            ["--nodes", "2", "--trace", GAVEL, "--format", "gavel", "--policy", "themis"],
            "--policy: unknown ['themis']",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str):
    result = runner.invoke(APP, ["simulate", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert message in lines[0]


def test_a_trace_that_cannot_be_rescaled_is_refused(tmp_path: Path):
    burst = contended_trace(tmp_path / "burst.csv", apart_s=0.0)
    result = runner.invoke(APP, ["simulate", "gaggle-h100", "--trace", str(burst), "--load", "1"])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "no arrival rate to rescale" in result.output


def test_jobs_out_to_a_missing_folder_is_one_line(tmp_path: Path):
    args = ["--nodes", "1", "--trace", GAVEL, "--format", "gavel", "--policy", "fifo"]
    out = tmp_path / "no" / "such" / "jobs.csv"
    result = runner.invoke(APP, ["simulate", *args, "--jobs-out", str(out)])
    assert result.exit_code == 2
    assert "--jobs-out: cannot write" in result.output
