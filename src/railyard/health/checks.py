"""The checks, by name, and the thresholds they are judged with.

Default thresholds (a fraction of the expected figure): warn below 0.9, fail below 0.8. Why:
a figure repeats within a few percent on a healthy node (seed 004 expects 185-190 GB/s of bus
bandwidth per A3 Mega GPU, a 3% band), while the faults that matter cost more: one NIC rail of
eight down leaves 7/8 = 0.875 of a node's bandwidth (a warning), two leave 0.75 (a failure),
and a thermally throttled GPU or a core shared with a runaway process loses far more. Every
threshold can be set per check (`railyard health --fail-below compute=0.6`). The CPU
all_reduce (gloo over loopback TCP) is looser by default, fail below 0.5 and warn below 0.7:
on a quiet node it still swings by a quarter between runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from railyard import probe
from railyard.health import expect as expecting
from railyard.health import gpu_checks, gpu_measure
from railyard.health import measure as measuring
from railyard.health.baseline import Baseline
from railyard.health.result import VERSIONS, Expected, Result, Status, judge

WARN_BELOW = 0.9
FAIL_BELOW = 0.8


@dataclass(frozen=True)
class Context:
    """What a run knows: the node, its declared GPUs, its baseline, the thresholds."""

    node: str
    declared_gpus: int | None = None
    baseline: Baseline | None = None
    flavor: str | None = None  # the node's GPU flavor: the twin's expectations
    fail_below: Mapping[str, float] = field(default_factory=dict)
    warn_below: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """A figure judged against the node's baseline."""

    name: str
    unit: str
    what: str
    measure: Callable[[], float]
    fail_below: float = FAIL_BELOW
    warn_below: float = WARN_BELOW

    def run(self, ctx: Context) -> Result:
        try:
            value = self.measure()
        except measuring.Unavailable as exc:
            return Result(self.name, ctx.node, Status.SKIP, unit=self.unit, detail=str(exc))
        if ctx.baseline is None or self.name not in ctx.baseline.figures:
            return Result(
                self.name, ctx.node, Status.SKIP, value, None, self.unit,
                detail="no baseline to judge against (railyard health --record-baseline)",
            )  # fmt: skip
        fail = ctx.fail_below.get(self.name, self.fail_below)
        warn = max(fail, ctx.warn_below.get(self.name, self.warn_below))
        expected = ctx.baseline.figures[self.name]
        return judge(
            self.name, ctx.node, value, expected, self.unit,
            fail_below=fail, warn_below=warn, source=ctx.baseline.source(),
        )  # fmt: skip


def gpu_inventory(ctx: Context) -> Result:
    """As many GPUs as the node declares, seen by NVML (a GPU that fell off the bus, XID 79,
    leaves the count short)."""
    problem = probe.nvml_problem()
    if problem is not None:
        return Result("gpu-inventory", ctx.node, Status.SKIP, detail=problem)
    found = probe.detect_gpus()
    if ctx.declared_gpus is None:
        return Result(
            "gpu-inventory", ctx.node, Status.PASS, float(len(found)), None, "GPUs",
            detail="no declared count to compare with",
        )  # fmt: skip
    ok = len(found) == ctx.declared_gpus
    return Result(
        "gpu-inventory", ctx.node, Status.PASS if ok else Status.FAIL,
        float(len(found)), float(ctx.declared_gpus), "GPUs", source="declared GPU count",
        detail="" if ok else f"NVML sees {len(found)} of {ctx.declared_gpus} declared GPUs",
    )  # fmt: skip


def gpu_versions(ctx: Context) -> Result:
    """The node's driver and CUDA versions (NVML), in `detail`: the control plane compares
    them with the other nodes' (`control.nodehealth`), since a node alone cannot know."""
    found = probe.driver_versions()
    if found is None:
        why = probe.nvml_problem() or "NVML reports no driver version"
        return Result(VERSIONS, ctx.node, Status.SKIP, detail=why)
    driver, cuda = found
    return Result(VERSIONS, ctx.node, Status.PASS, source="NVML",
                  detail=f"driver {driver}, CUDA {cuda}")  # fmt: skip


FIGURES = {
    c.name: c
    for c in (
        Check(
            "compute",
            "GFLOP/s",
            "float32 matrix products, one thread",
            lambda: measuring.in_child("matmul_gflops"),
        ),
        Check(
            "memory",
            "GB/s",
            "memory copy bandwidth (read + write)",
            lambda: measuring.in_child("copy_gbps"),
        ),
        Check(
            "allreduce",
            "GB/s",
            "all_reduce bus bandwidth within the node (gloo, 2 ranks; needs torch)",
            lambda: measuring.in_child("allreduce_busbw_gbps", timeout_s=120.0),
            # gloo over loopback TCP swings 25% between runs on a quiet node; NCCL does not
            fail_below=0.5,
            warn_below=0.7,
        ),
    )
}


def _twin_check(
    name: str,
    unit: str,
    expect: Callable[[str, int], Expected],
    measure: Callable[[], tuple[float, str]],
) -> Callable[[Context], Result]:
    """A GPU figure judged against the twin's expectation for the node's flavor."""

    def run(ctx: Context) -> Result:
        if not ctx.flavor:
            why = "no GPU flavor to expect figures of (railyard health --flavor F)"
            return Result(name, ctx.node, Status.SKIP, unit=unit, detail=why)
        try:
            expected = expect(ctx.flavor, ctx.declared_gpus or 8)
        except expecting.UnknownFlavor as exc:
            return Result(name, ctx.node, Status.SKIP, unit=unit, detail=str(exc))
        try:
            measured, detail = measure()
        except measuring.Unavailable as exc:
            return Result(name, ctx.node, Status.SKIP, unit=unit, detail=str(exc))
        fail = ctx.fail_below.get(name, FAIL_BELOW)
        warn = max(fail, ctx.warn_below.get(name, WARN_BELOW))
        judged = judge(
            name, ctx.node, measured, expected.value, unit,
            fail_below=fail, warn_below=warn, source=expected.source,
        )  # fmt: skip
        return replace(judged, detail=detail)

    return run


def _slowest_gpu() -> tuple[float, str]:
    rates = gpu_measure.in_child("gemm_tflops_per_gpu")
    worst = min(range(len(rates)), key=rates.__getitem__)
    return float(rates[worst]), f"slowest GPU {worst} of {len(rates)}"


def _nccl() -> tuple[float, str]:
    return float(gpu_measure.in_child("nccl_allreduce_busbw_gbps")), "NCCL, every GPU"


def _on_node(run: Callable[[str], Result]) -> Callable[[Context], Result]:
    return lambda ctx: run(ctx.node)


_GPU_STATE = {
    "gpu-xid": gpu_checks.xid_check,
    "gpu-ecc": gpu_checks.nvml_check(gpu_checks.judge_ecc, "gpu-ecc"),
    "gpu-throttle": gpu_checks.nvml_check(gpu_checks.judge_throttle, "gpu-throttle"),
    "gpu-pcie": gpu_checks.nvml_check(gpu_checks.judge_pcie, "gpu-pcie"),
}
CHECKS: dict[str, Callable[[Context], Result]] = {
    **{name: check.run for name, check in FIGURES.items()},
    "gpu-gemm": _twin_check(
        "gpu-gemm", "TFLOP/s", lambda f, _: expecting.gemm_tflops(f), _slowest_gpu
    ),
    "nccl-allreduce": _twin_check("nccl-allreduce", "GB/s", expecting.allreduce_busbw_gbps, _nccl),
    "gpu-inventory": gpu_inventory,
    VERSIONS: gpu_versions,
    **{name: _on_node(run) for name, run in _GPU_STATE.items()},
}


def run_checks(names: list[str], ctx: Context) -> list[Result]:
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check {unknown[0]!r} (hint: one of {', '.join(CHECKS)})")
    return [CHECKS[n](ctx) for n in names]


def record(names: list[str], node: str, now_t_s: float) -> Baseline:
    """Measure the figure checks among `names` and keep them as the node's baseline."""
    figures = {}
    for name in names:
        if name in FIGURES:
            try:
                figures[name] = FIGURES[name].measure()
            except measuring.Unavailable:
                continue  # judged as skipped later, with the reason
    return Baseline(node, now_t_s, figures)
