"""Health checks: how a figure is judged, baselines, the NVML inventory, the CLI's errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from railyard import probe
from railyard.health import baseline as baselines
from railyard.health.checks import Context, gpu_inventory, run_checks
from railyard.health.result import Status, judge
from tests.parts import needs


@pytest.mark.parametrize(
    ("measured", "status"),
    [(100.0, Status.PASS), (90.0, Status.PASS), (89.9, Status.WARN), (80.0, Status.WARN),
     (79.9, Status.FAIL), (0.0, Status.FAIL)],
)  # fmt: skip
def test_a_figure_passes_warns_or_fails_by_its_fraction_of_expected(measured, status):
    result = judge("compute", "n0", measured, 100.0, "GFLOP/s", fail_below=0.8, warn_below=0.9,
                   source="baseline")  # fmt: skip
    assert result.status is status
    assert result.ratio == pytest.approx(measured / 100.0)


def test_a_failure_reads_as_a_drain_reason_with_its_figures():
    result = judge("compute", "n0", 17.5, 84.7, "GFLOP/s", fail_below=0.8, warn_below=0.9,
                   source="baseline of n0")  # fmt: skip
    assert result.reason() == "health: compute 17.5 GFLOP/s < 0.8 x expected 84.7 GFLOP/s"


def test_thresholds_must_be_ordered():
    with pytest.raises(ValueError, match="0 < fail_below <= warn_below"):
        judge("memory", "n0", 1.0, 1.0, "GB/s", fail_below=0.9, warn_below=0.8, source="")


def test_a_baseline_round_trips_and_bad_files_say_which(tmp_path: Path):
    path = tmp_path / "n0.json"
    baselines.save(path, baselines.Baseline("n0", 1.0e9, {"compute": 80.0}))
    loaded = baselines.load(path)
    assert (loaded.node, loaded.figures) == ("n0", {"compute": 80.0})
    assert loaded.source() == "baseline of n0 recorded 2001-09-09T01:46:40Z"
    with pytest.raises(baselines.BaselineError, match=r"nope\.json: no baseline \(hint"):
        baselines.load(tmp_path / "nope.json")
    path.write_text("{}")
    with pytest.raises(baselines.BaselineError, match=r"n0\.json: not a railyard baseline"):
        baselines.load(path)


def test_figures_without_a_baseline_are_measured_and_skipped():
    [compute] = run_checks(["compute"], Context("n0"))
    assert compute.status is Status.SKIP
    assert compute.measured is not None
    assert compute.measured > 0
    with pytest.raises(ValueError, match="unknown check 'gemm'"):
        run_checks(["gemm"], Context("n0"))


class FakeNvml(SimpleNamespace):
    """NVML cannot run on a machine without an NVIDIA driver: this stands in for pynvml's
    three calls the inventory check makes (a legitimate mock; the real path runs where NVML
    exists)."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, dev: int) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, dev: int) -> str:
        return f"GPU-{dev}"

    def nvmlDeviceGetMemoryInfo(self, dev: int) -> SimpleNamespace:
        return SimpleNamespace(total=85_000_000_000)


@pytest.mark.parametrize(("seen", "status"), [(8, Status.PASS), (7, Status.FAIL)])
def test_gpu_inventory_fails_when_a_gpu_fell_off_the_bus(monkeypatch, seen, status):
    monkeypatch.setattr(probe, "_pynvml", FakeNvml(seen))
    result = gpu_inventory(Context("n0", declared_gpus=8))
    assert result.status is status
    assert (result.measured, result.expected) == (float(seen), 8.0)


def test_gpu_inventory_skips_without_nvml(monkeypatch):
    monkeypatch.setattr(probe, "_pynvml", None)
    result = gpu_inventory(Context("n0", declared_gpus=8))
    assert result.status is Status.SKIP
    assert "pynvml is not installed" in result.detail


@needs("gpu")
def test_gpu_inventory_on_a_real_gpu_node():
    result = gpu_inventory(Context("here", declared_gpus=len(probe.detect_gpus())))
    assert result.status is Status.PASS


def health(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "railyard", "health", *args],
        capture_output=True, text=True, timeout=120, check=False,
        env={"RAILYARD_HOME": str(home), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--checks", "gemm"], "railyard: --checks: unknown check 'gemm' (hint: one of compute"),
        (["--fail-below", "compute"], "railyard: --fail-below: 'compute' is not CHECK=FRACTION"),
        (["--fail-below", "compute=2"], "railyard: --fail-below: 'compute=2': the fraction must"),
        (["--warn-below", "comptue=0.5"], "railyard: --warn-below: unknown check 'comptue' (hint"),
        (["--baseline", "/nope.json"], "railyard: /nope.json: no baseline (hint: record one"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], line: str):
    done = health(*args, home=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(line)
    assert done.stderr.count("\n") == 1


@pytest.mark.exclusive  # records this machine's speed, then judges it (tests/conftest.py)
def test_record_then_judge_in_json(tmp_path: Path):
    recorded = health("--checks", "memory", "--record-baseline", "--node", "n0", home=tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    assert (tmp_path / "health" / "n0.json").exists()
    done = health("--checks", "memory", "--node", "n0", "--fail-below", "memory=0.05",
                  "--json", home=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)["results"]
    assert result["check"] == "memory"
    assert result["status"] in ("pass", "warn")
    assert result["source"].startswith("baseline of n0 recorded ")


@needs("torch")
def test_allreduce_runs_two_real_gloo_ranks_and_is_judged_loosely():
    known = baselines.Baseline("n0", 0.0, {"allreduce": 1e-3})  # 1 MB/s: any real run passes
    [result] = run_checks(["allreduce"], Context("n0", baseline=known))
    assert result.status is Status.PASS
    assert result.measured is not None
    assert result.measured > 1e-3
    assert (result.fail_below, result.warn_below) == (0.5, 0.7)  # gloo's own defaults
