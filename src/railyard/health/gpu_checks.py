"""GPU state checks: XID errors, ECC and row remapping, clock throttling, PCIe link width.

These are not figures against a baseline but faults a GPU reports. Which ones are fatal (the
node's jobs are requeued at once) follows NVIDIA's XID catalogue and its guidance on memory
errors (https://docs.nvidia.com/deploy/xid-errors/ and
https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/): an uncorrectable ECC error or a
failed row remap leaves the GPU's memory untrustworthy, XID 79 means the GPU fell off the bus;
a pending page retirement or row remap needs a GPU reset before the GPU is whole again (a
failure: drain, let jobs end, reset).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from railyard import probe
from railyard.health.result import Result, Status

XID_DOC = "NVIDIA XID catalogue (docs.nvidia.com/deploy/xid-errors)"
# XID -> (fatal, what it means), from the catalogue above
XIDS: dict[int, tuple[bool, str]] = {
    13: (False, "graphics engine exception (often the application)"),
    31: (False, "GPU memory page fault (often the application)"),
    43: (False, "GPU stopped processing (often the application)"),
    45: (False, "preemptive cleanup after another error"),
    48: (True, "double-bit ECC error"),
    61: (True, "internal micro-controller breakpoint"),
    62: (True, "internal micro-controller halt"),
    63: (False, "ECC page retirement or row remapping recorded"),
    64: (True, "ECC page retirement or row remapping failure"),
    74: (True, "NVLink error"),
    79: (True, "GPU has fallen off the bus"),
    92: (False, "high single-bit ECC error rate"),
    94: (True, "contained uncorrectable ECC error"),
    95: (True, "uncontained uncorrectable ECC error"),
    119: (True, "GSP RPC timeout"),
    120: (True, "GSP error"),
}
_XID_LINE = re.compile(r"NVRM: Xid \((?P<bus>[^)]*)\): (?P<xid>\d+)")

# NVML clocks-event reasons (nvmlClocksEventReason*, nvml.h): the ones that mean a fault
THROTTLE_FAULTS = {
    0x08: "hardware slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
THROTTLE_WARNINGS = {0x20: "software thermal slowdown"}


@dataclass(frozen=True)
class Xid:
    bus: str
    code: int

    @property
    def fatal(self) -> bool:
        return XIDS.get(self.code, (False, ""))[0]

    def describe(self) -> str:
        what = XIDS.get(self.code, (False, "see the XID catalogue"))[1]
        return f"XID {self.code} on {self.bus} ({what})"


def parse_xids(lines: Iterable[str]) -> list[Xid]:
    """XID errors in kernel log lines (``NVRM: Xid (PCI:0000:3b:00): 79, pid=...``)."""
    return [
        Xid(m["bus"], int(m["xid"])) for line in lines if (m := _XID_LINE.search(line)) is not None
    ]


def kernel_log() -> list[str] | str:
    """The kernel ring buffer's lines, or why it cannot be read (NHC reads it the same way)."""
    try:
        done = subprocess.run(
            ["dmesg", "--kernel"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot read the kernel log: {exc}"
    if done.returncode != 0:
        return f"cannot read the kernel log: {done.stderr.strip() or 'dmesg failed'}"
    return done.stdout.splitlines()


def judge_xids(node: str, log: list[str] | str) -> Result:
    if isinstance(log, str):
        return Result("gpu-xid", node, Status.SKIP, detail=log)
    found = parse_xids(log)
    fatal = [x for x in found if x.fatal]
    if fatal:
        return Result(
            "gpu-xid", node, Status.FAIL, float(len(found)), 0.0, "XIDs",
            source=XID_DOC, detail=fatal[-1].describe(), fatal=True,
        )  # fmt: skip
    if found:
        return Result(
            "gpu-xid", node, Status.WARN, float(len(found)), 0.0, "XIDs",
            source=XID_DOC, detail=found[-1].describe(),
        )  # fmt: skip
    return Result("gpu-xid", node, Status.PASS, 0.0, 0.0, "XIDs", source="kernel log")


def judge_ecc(node: str, gpus: list[probe.GpuFaults]) -> Result:
    """Uncorrectable ECC errors or a failed row remap: fatal; a pending retirement or remap:
    a failure (the GPU needs a reset)."""
    for g in gpus:
        if g.ecc_uncorrected:
            why = f"GPU {g.index}: {g.ecc_uncorrected} uncorrectable ECC error(s)"
            return Result("gpu-ecc", node, Status.FAIL, source=XID_DOC, detail=why, fatal=True)
        if g.remap_failed:
            why = f"GPU {g.index}: a row remap failed"
            return Result("gpu-ecc", node, Status.FAIL, source=XID_DOC, detail=why, fatal=True)
    for g in gpus:
        if g.retired_pages_pending or g.remap_pending:
            why = f"GPU {g.index}: page retirement or row remap pending (reset the GPU)"
            return Result("gpu-ecc", node, Status.FAIL, source=XID_DOC, detail=why)
    return Result("gpu-ecc", node, Status.PASS, detail=f"{len(gpus)} GPUs without ECC faults")


def judge_throttle(node: str, gpus: list[probe.GpuFaults]) -> Result:
    """A GPU held back by a hardware slowdown, thermal limit or power brake fails; a software
    thermal limit warns. A power cap under load is normal and not judged."""
    for table, status in ((THROTTLE_FAULTS, Status.FAIL), (THROTTLE_WARNINGS, Status.WARN)):
        for g in gpus:
            active = [why for bit, why in table.items() if (g.throttle_reasons or 0) & bit]
            if active:
                detail = f"GPU {g.index}: {', '.join(active)}"
                return Result("gpu-throttle", node, status, detail=detail, source="NVML")
    return Result("gpu-throttle", node, Status.PASS, detail=f"{len(gpus)} GPUs not throttled")


def judge_pcie(node: str, gpus: list[probe.GpuFaults]) -> Result:
    """A link running narrower than it can fails (a bad riser or slot halves host-device
    bandwidth). The generation is not judged: an idle GPU lowers it to save power."""
    measured = [
        (g.index, g.pcie_width, g.pcie_width_max)
        for g in gpus
        if g.pcie_width is not None and g.pcie_width_max
    ]
    for index, width, most in measured:
        if width < most:
            return Result(
                "gpu-pcie", node, Status.FAIL, float(width), float(most), "lanes",
                source="NVML: the most this GPU and slot allow",
                detail=f"GPU {index} runs PCIe x{width} of x{most}",
            )  # fmt: skip
    if not measured:
        return Result("gpu-pcie", node, Status.SKIP, detail="NVML reports no PCIe link width")
    return Result("gpu-pcie", node, Status.PASS, detail=f"{len(measured)} GPUs at full width")


def nvml_check(
    judge: Callable[[str, list[probe.GpuFaults]], Result], name: str
) -> Callable[[str], Result]:
    """A check over every GPU's faults, skipped with the reason where NVML cannot be asked."""

    def run(node: str) -> Result:
        problem = probe.nvml_problem()
        if problem is not None:
            return Result(name, node, Status.SKIP, detail=problem)
        return judge(node, probe.read_faults())

    return run


def xid_check(node: str) -> Result:
    return judge_xids(node, kernel_log())
