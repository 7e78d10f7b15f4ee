"""``perf calibrate`` on this machine's CPU with tiny shapes, the file it writes, and how the
step model uses it. (The GPU measurements need a GPU; on CPU the same code paths run.)"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from tests.parts import needs
from tests.twin.test_train import FakeComm

from railyard.blueprint.catalog import GPUS
from railyard.twin.calibrate import measure
from railyard.twin.calibration import (
    AttentionPoint,
    Calibration,
    CalibrationError,
    GemmPoint,
    load,
    save,
)
from railyard.twin.models import PRESETS, Parallelism
from railyard.twin.train import estimate_step

H100 = GPUS["H100-SXM-80GB"]


@pytest.fixture(scope="module")
def measured() -> Calibration:
    return measure("cpu", quick=True, gemms=((32, 32, 32), (64, 64, 64)), seqs=(32,),
                   head_dims=(16,))  # fmt: skip


@needs("torch")  # measure() times torch kernels
def test_cpu_calibration_measures_every_figure(measured: Calibration, tmp_path: Path) -> None:
    assert measured.device
    assert measured.torch_version
    assert [(g.m, g.n, g.k) for g in measured.gemm] == [(32, 32, 32), (64, 64, 64)]
    assert all(g.tflops > 0 and 0 < g.efficiency <= 1.0 for g in measured.gemm)
    assert {(a.direction, a.seq, a.head_dim) for a in measured.attention} == {
        ("fwd", 32, 16),
        ("bwd", 32, 16),
    }
    assert measured.hbm_gbyte_s > 0
    assert measured.host_us_per_kernel > 0
    path = tmp_path / "cal.json"
    save(measured, path)
    assert load(path) == measured
    assert json.loads(path.read_text())["version"] == 1


def _synthetic(**changes: object) -> Calibration:
    cal = Calibration(
        device="NVIDIA H100 80GB HBM3", torch_version="2.13.0", peak_tflops=989.5,
        hbm_gbyte_s=2900.0, host_us_per_kernel=8.0, gpu_us_per_kernel=1.0,
        gemm=(GemmPoint(8192, 8192, 8192, 700.0, 700 / 989.5),),
        attention=(AttentionPoint("cudnn", "fwd", True, 128, 4096, 300.0),
                   AttentionPoint("cudnn", "bwd", True, 128, 4096, 250.0)),
    )  # fmt: skip
    return dataclasses.replace(cal, **changes)  # type: ignore[arg-type]


def test_the_step_model_uses_the_calibrated_rates() -> None:
    arch, par = PRESETS["llama3-8b"], Parallelism(tp=8, micro_batch=1, global_batch=8)
    plain = estimate_step(arch, par, H100, 8, FakeComm())
    slow = estimate_step(arch, par, H100, 8, FakeComm(), calibration=_synthetic())
    quick = _synthetic(gemm=(GemmPoint(1, 1, 1, 900.0, 0.91),))
    fast = estimate_step(arch, par, H100, 8, FakeComm(), calibration=quick)
    assert slow.breakdown["gemm"] > plain.breakdown["gemm"] > fast.breakdown["gemm"]
    # measured attention (300 fwd, 250 bwd TFLOP/s) replaces the published cuDNN rates
    assert slow.breakdown["attention"] != plain.breakdown["attention"]


def test_the_nearest_measured_attention_point_is_used() -> None:
    cal = _synthetic()
    assert cal.attention_tflops("cudnn", "fwd", True, 128, 8192) == 300.0
    assert cal.attention_tflops("flash2", "fwd", True, 128, 8192) is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "cal.json:1: not JSON"),
        ('{"version": 2}', "cal.json: version: 2 is not 1"),
        ('{"version": 1, "gemm": []}', "cal.json: attention: missing"),
        ('{"version": 1, "gemm": [{"m": 1}], "attention": []}', "gemm[0]: n: missing"),
        (
            '{"version": 1, "gemm": [], "attention": [], "device": "x", "torch_version": "2", '
            '"peak_tflops": "fast"}',
            "peak_tflops: expected int or float",
        ),
    ],
)
def test_bad_calibration_files_name_file_and_field(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "cal.json"
    path.write_text(content)
    with pytest.raises(CalibrationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load(path)
