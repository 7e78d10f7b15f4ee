"""GPU state checks: XID lines in the kernel log, ECC and row remapping, throttling, PCIe.

The judging is tested on readings in NVML's own shapes and on kernel log lines in the
driver's format; the checks themselves run against this machine's NVML and kernel log, and
skip with the reason where there is no NVML (CI has no GPU)."""

from __future__ import annotations

import re

import pytest

from railyard import probe
from railyard.health.checks import CHECKS, Context, run_checks
from railyard.health.gpu_checks import (
    judge_ecc,
    judge_pcie,
    judge_throttle,
    judge_xids,
    kernel_log,
    parse_xids,
)
from railyard.health.result import Status
from tests.parts import require

LOG = [
    "[ 5.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07",
    "[812.3] NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python, Graphics Exception",
    "[913.0] NVRM: Xid (PCI:0000:86:00): 79, pid=1, name=python, GPU has fallen off the bus.",
]
G = probe.GpuFaults


def test_xids_are_read_from_the_drivers_lines() -> None:
    found = parse_xids(LOG)
    assert [(x.bus, x.code, x.fatal) for x in found] == [
        ("PCI:0000:3b:00", 13, False), ("PCI:0000:86:00", 79, True),
    ]  # fmt: skip


def test_a_fatal_xid_is_fatal_and_names_the_gpu() -> None:
    result = judge_xids("n1", LOG)
    assert result.fatal
    assert result.status is Status.FAIL
    assert result.reason() == (
        "health: gpu-xid: XID 79 on PCI:0000:86:00 (GPU has fallen off the bus)"
    )
    application = judge_xids("n1", LOG[:2])
    assert (application.status, application.fatal) == (Status.WARN, False)
    assert judge_xids("n1", LOG[:1]).status is Status.PASS
    assert judge_xids("n1", "cannot read the kernel log: denied").status is Status.SKIP


def test_the_xid_check_reads_this_machines_kernel_log() -> None:
    log = kernel_log()
    [result] = run_checks(["gpu-xid"], Context("here"))
    if isinstance(log, str):
        assert result.status is Status.SKIP
        assert result.detail == log
    else:
        assert result.status is judge_xids("here", log).status


@pytest.mark.parametrize(
    ("gpus", "status", "fatal", "detail"),
    [
        ([G(0, ecc_uncorrected=0), G(1, ecc_uncorrected=0)], Status.PASS, False, "2 GPUs"),
        ([G(0, ecc_uncorrected=0), G(1, ecc_uncorrected=2)], Status.FAIL, True,
         "GPU 1: 2 uncorrectable ECC error(s)"),
        ([G(0, remap_failed=True)], Status.FAIL, True, "GPU 0: a row remap failed"),
        ([G(0, remap_pending=True)], Status.FAIL, False, "GPU 0: page retirement or row remap"),
        ([G(0, retired_pages_pending=True)], Status.FAIL, False, "GPU 0: page retirement"),
    ],
)  # fmt: skip
def test_ecc(gpus: list[probe.GpuFaults], status: Status, fatal: bool, detail: str) -> None:
    result = judge_ecc("n1", gpus)
    assert (result.status, result.fatal) == (status, fatal)
    assert result.detail.startswith(detail)


@pytest.mark.parametrize(
    ("reasons", "status", "detail"),
    [(0x1 | 0x4, Status.PASS, "1 GPUs not throttled"),  # idle, power cap: normal
     (0x20, Status.WARN, "GPU 0: software thermal slowdown"),
     (0x40 | 0x20, Status.FAIL, "GPU 0: hardware thermal slowdown"),
     (0x08, Status.FAIL, "GPU 0: hardware slowdown")],
)  # fmt: skip
def test_throttle(reasons: int, status: Status, detail: str) -> None:
    result = judge_throttle("n1", [G(0, throttle_reasons=reasons)])
    assert (result.status, result.detail) == (status, detail)


def test_pcie_width_is_judged_not_the_generation() -> None:
    idle = G(0, pcie_gen=1, pcie_gen_max=5, pcie_width=16, pcie_width_max=16)
    assert judge_pcie("n1", [idle]).status is Status.PASS
    narrow = judge_pcie("n1", [idle, G(1, pcie_width=8, pcie_width_max=16)])
    assert narrow.status is Status.FAIL
    assert (narrow.measured, narrow.expected, narrow.detail) == (8, 16, "GPU 1 runs PCIe x8 of x16")
    assert judge_pcie("n1", [G(0)]).status is Status.SKIP


@pytest.mark.parametrize("name", ["gpu-ecc", "gpu-throttle", "gpu-pcie"])
def test_nvml_checks_on_this_machine(name: str) -> None:
    problem = probe.nvml_problem()
    [result] = run_checks([name], Context("here"))
    if problem is not None:
        assert result.status is Status.SKIP
        assert result.detail == problem
        require("gpu")  # the SKIP above is what a node without NVML reports
    assert result.status in (Status.PASS, Status.WARN, Status.FAIL)
    assert result.check in CHECKS


def test_the_versions_check_reads_the_driver_or_skips_saying_why() -> None:
    """Judged across nodes by the control plane (tests/control/test_node_versions.py); the
    node's own part reads the versions as nvidia-smi prints them."""
    [result] = run_checks(["gpu-versions"], Context("here"))
    problem = probe.nvml_problem()
    if problem is not None:
        assert (result.status, result.detail) == (Status.SKIP, problem)
        require("gpu")
    assert result.status is Status.PASS
    assert re.fullmatch(r"driver [0-9.]+, CUDA [0-9]+\.[0-9]+", result.detail), result.detail
