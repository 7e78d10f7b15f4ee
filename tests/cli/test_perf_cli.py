"""`railyard perf` as a user runs it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from railyard.cli.design import full_app

app = full_app()

runner = CliRunner(env={"COLUMNS": "160"})


def test_collective_sweep_is_shaped_like_nccl_tests() -> None:
    result = runner.invoke(app, ["perf", "collective", "gaggle-h100", "-b", "1M", "-e", "16M",
                                 "-f", "4"])  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line and line[0] != "#"]
    assert [int(r[0]) for r in rows] == [1 << 20, 1 << 22, 1 << 24]
    assert all(r[2:5] == ["float", "sum", "-1"] for r in rows)
    busbw = [float(r[7]) for r in rows]
    assert busbw == sorted(busbw)  # bandwidth grows with size
    assert "# Avg bus bandwidth" in result.output


def test_collective_json_has_busbw_factor() -> None:
    result = runner.invoke(app, ["perf", "collective", "gaggle-h100", "-n", "1", "--op",
                                 "all_gather", "-b", "1G", "-e", "1G", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["all_gather"]
    assert row["busbw_gbyte_s"] == row["algbw_gbyte_s"] * 7 / 8  # (n-1)/n, nccl-tests


def test_bad_size_is_exit_2() -> None:
    result = runner.invoke(app, ["perf", "collective", "gaggle-h100", "-b", "lots"])
    assert result.exit_code == 2
    assert "-b: 'lots' is not a size" in result.output


def test_train_reports_memory_that_does_not_fit() -> None:
    result = runner.invoke(app, ["perf", "train", "gaggle-h100", "--model", "gpt3-175b",
                                 "--tp", "8", "--global-batch", "8", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["fits"] is False
    assert data["memory"].startswith("does not fit")


def test_validate_covers_every_reference_row() -> None:
    result = runner.invoke(app, ["perf", "validate", "--json"])
    assert result.exit_code == 0, result.output
    checks = json.loads(result.output)
    ids = {c["row_id"].split(".")[0] for c in checks}
    assert {"c01", "c14", "t01", "t07", "m01", "m03", "m04", "k01", "f01"} <= ids
    for c in checks:
        assert c["within_target"] == (abs(c["error"]) <= c["target"] + 1e-9)
