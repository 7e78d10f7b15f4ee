"""Per-GPU metrics under dcgm-exporter's names, labelled with the job placed on each GPU.

NVML cannot run on a machine without an NVIDIA driver (this one), so the mapping from NVML's
answers to samples is tested with a fake ``pynvml`` module passed in as ``nvml`` (a stand-in
for the hardware only: the store, the loop, its processes and the HTTP scrape are real). The
real NVML path runs where ``pynvml`` and a GPU exist and is skipped elsewhere.
"""

from __future__ import annotations

import subprocess
import types
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tests.control.loop_helpers import NODE, job
from tests.control.metrics_helpers import Live, live, samples, scrape
from tests.parts import needs

from railyard import probe
from railyard.control.api.app import create_app
from railyard.control.metrics.gpus import DCGM_NAMES
from railyard.control.metrics.prometheus import MetricsConfig

__all__ = ["live"]  # the fixture
MIB = 1024 * 1024


class NotSupported(Exception):
    """What pynvml raises (NVMLError_NotSupported) for a figure a GPU cannot report."""


def fake_nvml(count: int = 4, *, init_fails: bool = False) -> types.ModuleType:
    """A pynvml-shaped module over ``count`` made-up H100s; GPU 3 reports no power."""
    nvml = types.ModuleType("fake_pynvml")
    calls = {"init": 0, "shutdown": 0}

    def init() -> None:
        calls["init"] += 1
        if init_fails:
            raise RuntimeError("NVML Shared Library Not Found")

    def power(index: int) -> int:
        if index == 3:
            raise NotSupported("Not Supported")
        return 300_000 + index  # milliwatts

    def memory(index: int) -> Any:
        return types.SimpleNamespace(total=80 * 1024 * MIB, used=1024 * MIB * index, free=MIB)

    fields: dict[str, Any] = {
        "calls": calls,
        "NVML_TEMPERATURE_GPU": 0,
        "NVML_CLOCK_SM": 1,
        "NVML_CLOCK_MEM": 2,
        "nvmlInit": init,
        "nvmlShutdown": lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1),
        "nvmlDeviceGetCount": lambda: count,
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda i: b"NVIDIA H100 80GB HBM3",  # old pynvml: bytes
        "nvmlDeviceGetUUID": lambda i: f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd",
        "nvmlDeviceGetMinorNumber": lambda i: 10 + i,
        "nvmlDeviceGetUtilizationRates": lambda i: types.SimpleNamespace(gpu=25 * i, memory=0),
        "nvmlDeviceGetMemoryInfo": memory,
        "nvmlDeviceGetPowerUsage": power,
        "nvmlDeviceGetTemperature": lambda i, sensor: 40 + i,
        "nvmlDeviceGetClockInfo": lambda i, kind: 1980 if kind == 1 else 2619,
    }
    for name, value in fields.items():
        setattr(nvml, name, value)
    return nvml


def test_readings_are_in_dcgm_units_and_a_missing_figure_is_none() -> None:
    nvml = fake_nvml()
    readings = probe.read_gpus(nvml)
    assert [r.index for r in readings] == [0, 1, 2, 3]
    second = readings[1]
    assert (second.name, second.uuid, second.minor) == (
        "NVIDIA H100 80GB HBM3",
        "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd",
        11,
    )
    assert (second.util_pct, second.fb_used_mib, second.fb_free_mib) == (25, 1024, 1)
    assert (second.power_w, second.temp_c) == (300.001, 41)
    assert (second.sm_clock_mhz, second.mem_clock_mhz) == (1980, 2619)
    assert readings[3].power_w is None
    assert readings[3].temp_c == 43
    assert nvml.calls == {"init": 1, "shutdown": 1}  # never left initialised


def test_no_driver_means_no_readings() -> None:
    nvml = fake_nvml(init_fails=True)
    assert probe.read_gpus(nvml) == []
    assert nvml.calls["shutdown"] == 0


def test_each_gpu_is_labelled_with_the_job_placed_on_it(live: Live, tmp_path: Path) -> None:
    nvml = fake_nvml()
    config = MetricsConfig(read_gpus=lambda: probe.read_gpus(nvml), node_name=NODE)
    app = create_app(live.store, wake=lambda: None, state_dir=tmp_path, metrics=config)
    found = samples(scrape(TestClient(app), live.token))
    owner = {i: live.small for i in job(live.store, live.small).placement[NODE]}
    owner.update({i: live.pair for i in job(live.store, live.pair).placement[NODE]})
    assert len(owner) == 3
    util = {
        dict(labels)["gpu"]: (dict(labels), v)
        for (n, labels), v in found.items()
        if n == "DCGM_FI_DEV_GPU_UTIL"
    }
    assert sorted(util) == ["0", "1", "2", "3"]
    for index in range(4):
        labels, util_pct = util[str(index)]
        assert util_pct == 25 * index
        assert labels["UUID"] == f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd"
        assert labels["device"] == f"nvidia{10 + index}"
        assert (labels["modelName"], labels["Hostname"]) == ("NVIDIA H100 80GB HBM3", NODE)
        expected = (owner[index], "alice", "default") if index in owner else ("", "", "")
        assert (labels["hpc_job"], labels["user"], labels["queue"]) == expected
    power = {
        dict(labels)["gpu"] for (n, labels), _ in found.items() if n == "DCGM_FI_DEV_POWER_USAGE"
    }
    assert power == {"0", "1", "2"}  # GPU 3 cannot say: absent, not zero
    assert {n for n, _ in found if n.startswith("DCGM_")} == DCGM_NAMES


def test_without_nvml_the_gpu_families_are_absent(live: Live, tmp_path: Path) -> None:
    config = MetricsConfig(
        read_gpus=lambda: probe.read_gpus(fake_nvml(init_fails=True)), node_name=NODE
    )
    app = create_app(live.store, wake=lambda: None, state_dir=tmp_path, metrics=config)
    text = scrape(TestClient(app), live.token)
    assert "railyard_jobs" in text
    assert "DCGM_" not in text


@needs("gpu")
def test_real_nvml_readings() -> None:
    readings = probe.read_gpus()
    for r in readings:
        assert r.uuid.startswith(("GPU-", "MIG-"))
        assert r.name
        assert r.fb_used_mib is not None
        assert r.fb_free_mib is not None
        assert r.fb_used_mib + r.fb_free_mib > 1024  # every datacenter GPU has over 1 GiB


@needs("promtool")
def test_promtool_objects_only_to_dcgm_exporters_own_label_names(
    live: Live, tmp_path: Path
) -> None:
    """promtool's lint wants snake_case labels; ``modelName``, ``UUID`` and ``Hostname`` are
    dcgm-exporter's (kept so its dashboards work), and they are its only complaint."""
    nvml = fake_nvml()
    config = MetricsConfig(read_gpus=lambda: probe.read_gpus(nvml), node_name=NODE)
    app = create_app(live.store, wake=lambda: None, state_dir=tmp_path, metrics=config)
    text = scrape(TestClient(app), live.token)
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    problems = [line for line in (checked.stdout + checked.stderr).splitlines() if line.strip()]
    assert problems
    for line in problems:
        assert line.startswith("DCGM_FI_DEV_"), line
        assert line.endswith("label names should be written in 'snake_case' not 'camelCase'")
