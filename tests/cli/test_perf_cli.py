"""`railyard perf` as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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


def test_train_shows_band_interleave_and_memory_per_stage() -> None:
    result = runner.invoke(app, ["perf", "train", "gaggle-h100", "--model", "llama3-70b",
                                 "--tp", "8", "--pp", "4", "--dp", "3", "--interleave", "5",
                                 "--global-batch", "96", "--sequence-parallel",
                                 "--distributed-optimizer", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["interleave"] == 5
    assert data["bubble_fraction"] == pytest.approx(3 / (32 * 5))
    stages = data["memory_per_stage_gib"]
    assert [s["layers"] for s in stages] == [20, 20, 20, 20]
    assert stages[0]["with_tables_states"] > stages[0]["layers_states"]
    assert stages[1]["with_tables_states"] == pytest.approx(stages[1]["layers_states"])
    band = data["error_band"]
    assert band["kind"] == "training on H100-SXM-80GB"
    assert band["rows"] > 10
    low, high = band["step_time_s_range"]
    assert low <= data["step_time_s"] * (1 + band["high"])
    assert high >= low
    # the interval's center: the time the published runs imply, inside the interval
    assert band["calibrated"]
    assert band["expected_step_time_s"] == pytest.approx(data["step_time_s"] * (1 + band["median"]))
    assert low <= band["expected_step_time_s"] <= high


def test_train_with_custom_dimensions_and_moe() -> None:
    result = runner.invoke(app, ["perf", "train", "gaggle-h100", "--layers", "16",
                                 "--hidden", "2048", "--heads", "16", "--kv-heads", "4",
                                 "--ffn-hidden", "1024", "--ffn-kind", "swiglu", "--vocab",
                                 "32000", "--seq-len", "4096", "--experts", "64", "--top-k",
                                 "8", "--dp", "8", "--ep", "8", "--global-batch", "64",
                                 "--implementation", "eager", "--attention", "flash2",
                                 "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["implementation"] == "eager"
    assert data["attention_backend"] == "flash2"
    assert data["parallel"]["ep"] == 8
    assert data["breakdown_s"]["tp_cp_ep_comm"] > 0  # the all-to-alls


def test_train_optimizer_switch_and_its_error() -> None:
    base = ["perf", "train", "gaggle-h100", "--model", "megatron-1.7b", "--implementation",
            "eager", "--micro-batch", "2", "--global-batch", "2", "--json"]  # fmt: skip
    fused = json.loads(runner.invoke(app, base).output)
    foreach = runner.invoke(app, [*base, "--optimizer", "foreach"])
    assert foreach.exit_code == 0, foreach.output
    data = json.loads(foreach.output)
    assert data["parallel"]["optimizer"] == "foreach"
    # torch's foreach AdamW makes about eight passes (82 B per parameter) against fused's 30
    assert data["breakdown_s"]["optimizer"] > 2 * fused["breakdown_s"]["optimizer"]
    bad = runner.invoke(app, [*base, "--optimizer", "sgd"])
    assert bad.exit_code == 2
    assert "unknown optimizer 'sgd'" in bad.output
    assert len(bad.output.strip().splitlines()) == 1


def test_custom_dimensions_need_all_of_them_without_a_base() -> None:
    result = runner.invoke(app, ["perf", "train", "gaggle-h100", "--layers", "16"])
    assert result.exit_code == 2
    assert "--hidden: missing" in result.output


def test_model_file_and_its_errors(tmp_path: Path) -> None:
    good = tmp_path / "m.yaml"
    good.write_text("base: llama3-8b\nlayers: 16\n")
    result = runner.invoke(app, ["perf", "train", "gaggle-h100", "--model-file", str(good),
                                 "--tp", "8", "--global-batch", "8", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["model"] == "m"
    bad = tmp_path / "bad.yaml"
    bad.write_text("layers: 16\nheads: sixteen\n")
    result = runner.invoke(app, ["perf", "train", "gaggle-h100", "--model-file", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:2: heads: 'sixteen' is not a whole number" in result.output


def test_uneven_stages_and_overlap_switches() -> None:
    args = ["perf", "train", "gaggle-h100", "--model", "llama3-405b", "--tp", "8", "--pp",
            "12", "--stage-layers", "10,11x10,6", "--global-batch", "24", "--json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [s["layers"] for s in data["memory_per_stage_gib"]][:2] == [10, 11]
    overlapped = runner.invoke(app, [*args, "--overlap-tp", "--overlap-pp"])
    assert json.loads(overlapped.output)["step_time_s"] < data["step_time_s"]
    bad = runner.invoke(app, [*args[:-1], "--stage-layers", "10,xx"])
    assert bad.exit_code == 2
    assert "--stage-layers" in bad.output


def test_train_local_without_a_gpu_is_a_clear_error() -> None:
    # this machine has no GPU; on a GPU machine local gives a one-node model
    result = runner.invoke(app, ["perf", "train", "local"])
    assert result.exit_code == 2
    assert "local: no GPUs to predict on" in result.output


def test_train_uses_a_calibration_file(tmp_path: Path) -> None:
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({
        "version": 1, "device": "NVIDIA H100 80GB HBM3", "torch_version": "2.13.0",
        "peak_tflops": 989.5, "hbm_gbyte_s": 2900.0, "host_us_per_kernel": 8.0,
        "gpu_us_per_kernel": 1.0, "notes": [],
        "gemm": [{"m": 8192, "n": 8192, "k": 8192, "tflops": 600.0, "efficiency": 0.61}],
        "attention": [],
    }))  # fmt: skip
    base = ["perf", "train", "gaggle-h100", "--tp", "8", "--global-batch", "8", "--json"]
    plain = json.loads(runner.invoke(app, base).output)
    calibrated = runner.invoke(app, [*base, "--calibration", str(cal)])
    assert calibrated.exit_code == 0, calibrated.output
    data = json.loads(calibrated.output)
    assert data["calibration"]["device"] == "NVIDIA H100 80GB HBM3"
    assert data["breakdown_s"]["gemm"] > plain["breakdown_s"]["gemm"]
    cal.write_text("{}")
    bad = runner.invoke(app, [*base, "--calibration", str(cal)])
    assert bad.exit_code == 2
    assert "version: missing" in bad.output


def test_search_shows_the_distributed_optimizer_and_the_band() -> None:
    result = runner.invoke(app, ["perf", "search", "gaggle-h100", "--model", "llama3-8b",
                                 "--gpus", "16", "--global-batch", "64", "--top", "3"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "dist-opt" in result.output
    assert "perf validate: training on H100-SXM-80GB" in result.output


def test_validate_a_user_csv(tmp_path: Path) -> None:
    table = tmp_path / "mine.csv"
    table.write_text(
        "id,kind,gpus,nodes,gpu,fabric,quantity,params,value,unit\n"
        "u1,training,64,8,H100-SXM-80GB,8x400G infiniband,achieved TFLOP/s per GPU,"
        "model=llama3-8b;tp=1;mbs=1;gbs=512;recompute=none;dist_opt=1;flops=model,400,TFLOP/s\n"
    )
    result = runner.invoke(app, ["perf", "validate", "--csv", str(table), "--json"])
    assert result.exit_code == 0, result.output
    (check,) = json.loads(result.output)
    assert check["row_id"] == "u1"
    assert check["predicted"] > 0
    table.write_text("id,kind\n")
    bad = runner.invoke(app, ["perf", "validate", "--csv", str(table)])
    assert bad.exit_code == 2
    assert "mine.csv:1: header: missing column" in bad.output


def test_validate_explains_every_miss() -> None:
    result = runner.invoke(app, ["perf", "validate"])
    assert result.exit_code == 0, result.output
    assert "misses and their causes:" in result.output
    assert "cause not known" not in result.output
