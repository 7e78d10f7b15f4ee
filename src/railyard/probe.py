"""Which GPUs this machine has, through NVML when it is installed.

The one place railyard probes hardware: the ``local`` blueprint preset, the executors and the
per-GPU metrics of ``/metrics`` (:func:`read_gpus`) all ask here.

NVML comes from the optional ``nvidia-ml-py`` package (module ``pynvml``); without it, or
without a driver, the machine reports no GPUs and a declared count (``--gpus 8``) is used.
API: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")

try:
    _pynvml: ModuleType | None = importlib.import_module("pynvml")
except ImportError:
    _pynvml = None


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    uuid: str
    memory_bytes: int


def _text(value: object) -> str:
    """Older pynvml releases return bytes, newer ones str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_problem(nvml: ModuleType | None = None) -> str | None:
    """Why NVML cannot be asked here (None when it can): no pynvml, or no driver."""
    lib = nvml if nvml is not None else _pynvml
    if lib is None:
        return "no NVML: pynvml is not installed (pip install 'railyard[gpu]')"
    try:
        lib.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return f"no NVML: {exc}"
    lib.nvmlShutdown()
    return None


def detect_gpus(nvml: ModuleType | None = None) -> list[GpuInfo]:
    """GPUs NVML sees, in NVML index order; empty when NVML or its driver is absent.

    Reads only; initialises and shuts NVML down on each call, so it is safe to repeat.
    """
    lib = nvml if nvml is not None else _pynvml
    if lib is None:
        return []
    try:
        lib.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no usable GPU
        return []
    try:
        found = []
        for index in range(int(lib.nvmlDeviceGetCount())):
            dev = lib.nvmlDeviceGetHandleByIndex(index)
            found.append(
                GpuInfo(
                    index=index,
                    name=_text(lib.nvmlDeviceGetName(dev)),
                    uuid=_text(lib.nvmlDeviceGetUUID(dev)),
                    memory_bytes=int(lib.nvmlDeviceGetMemoryInfo(dev).total),
                )
            )
        return found
    finally:
        lib.nvmlShutdown()


def driver_versions(nvml: ModuleType | None = None) -> tuple[str, str] | None:
    """The NVIDIA driver's version and the CUDA version it supports, as nvidia-smi prints
    them (``("550.54.15", "12.4")``); None when NVML or its driver is absent. NCCL needs the
    same across the nodes of a job (NVIDIA's NCCL troubleshooting guide)."""
    lib = nvml if nvml is not None else _pynvml
    if lib is None:
        return None
    try:
        lib.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return None
    try:
        driver = _text(lib.nvmlSystemGetDriverVersion())
        cuda = int(lib.nvmlSystemGetCudaDriverVersion())  # 12040 for CUDA 12.4
        return driver, f"{cuda // 1000}.{cuda % 1000 // 10}"
    finally:
        lib.nvmlShutdown()


def resolve_gpus(declared: int | None, nvml: ModuleType | None = None) -> int:
    """The node's GPU count: the declared one wins (so a CPU machine can pose as a GPU node),
    else what NVML reports."""
    if declared is not None:
        if declared < 0:
            raise ValueError(f"declared GPU count {declared} < 0")
        return declared
    return len(detect_gpus(nvml))


def gpu_minors(count: int, nvml: ModuleType | None = None) -> list[int]:
    """The device minor (``/dev/nvidia<minor>``) of GPU index 0..count-1: NVML's where it
    knows the GPU (minors need not follow indices), else the index (virtual GPUs)."""
    minors = list(range(count))
    lib = nvml if nvml is not None else _pynvml
    if lib is None or count == 0:
        return minors
    try:
        lib.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return minors
    try:
        for index in range(min(count, int(lib.nvmlDeviceGetCount()))):
            dev = lib.nvmlDeviceGetHandleByIndex(index)
            minors[index] = int(lib.nvmlDeviceGetMinorNumber(dev))
    except Exception:  # an NVMLError: keep the indices
        return list(range(count))
    finally:
        lib.nvmlShutdown()
    return minors


@dataclass(frozen=True)
class GpuReading:
    """One GPU's live figures, in dcgm-exporter's units (MiB, W, C, MHz, %); a figure this
    GPU or driver cannot report is None."""

    index: int
    uuid: str
    name: str
    minor: int | None = None  # /dev/nvidia<minor>: dcgm-exporter's ``device`` label
    util_pct: float | None = None
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None


_MIB = 1024 * 1024


def _maybe(read: Callable[[], object]) -> float | None:
    """A figure, or None where NVML says this GPU does not support it (NVMLError_NotSupported,
    _NoPermission...): one missing figure must not hide the others."""
    try:
        value = read()
    except Exception:
        return None
    return float(value)  # type: ignore[arg-type]


def read_gpus(nvml: ModuleType | None = None) -> list[GpuReading]:
    """Live figures of every GPU NVML sees (utilisation, framebuffer, power, temperature,
    clocks); empty when NVML or its driver is absent. Initialises and shuts NVML down on each
    call, like :func:`detect_gpus`, so a scrape never holds the driver between calls.

    XID errors are not here: NVML reports them only as events to a registered event set, not
    as a value to read (https://docs.nvidia.com/deploy/nvml-api/group__nvmlEvents.html).
    """
    return _each_gpu(nvml, _reading)


def _reading(lib: ModuleType, index: int) -> GpuReading:
    dev = lib.nvmlDeviceGetHandleByIndex(index)
    memory = _memory(lib, dev)
    minor = _maybe(lambda: lib.nvmlDeviceGetMinorNumber(dev))
    return GpuReading(
        index=index,
        uuid=_text(lib.nvmlDeviceGetUUID(dev)),
        name=_text(lib.nvmlDeviceGetName(dev)),
        minor=None if minor is None else int(minor),
        util_pct=_maybe(lambda: lib.nvmlDeviceGetUtilizationRates(dev).gpu),
        fb_used_mib=None if memory is None else memory[0],
        fb_free_mib=None if memory is None else memory[1],
        power_w=_maybe(lambda: lib.nvmlDeviceGetPowerUsage(dev) / 1000.0),  # milliwatts
        temp_c=_maybe(lambda: lib.nvmlDeviceGetTemperature(dev, lib.NVML_TEMPERATURE_GPU)),
        sm_clock_mhz=_maybe(lambda: lib.nvmlDeviceGetClockInfo(dev, lib.NVML_CLOCK_SM)),
        mem_clock_mhz=_maybe(lambda: lib.nvmlDeviceGetClockInfo(dev, lib.NVML_CLOCK_MEM)),
    )


def _memory(lib: ModuleType, dev: object) -> tuple[float, float] | None:
    try:
        info = lib.nvmlDeviceGetMemoryInfo(dev)
    except Exception:
        return None
    return info.used / _MIB, info.free / _MIB


@dataclass(frozen=True)
class GpuFaults:
    """One GPU's error and link state, for the health checks; None where NVML cannot say.

    ``throttle_reasons`` is NVML's clocks-event bitmask; the PCIe figures are the link as it
    runs now and the most this GPU and system allow."""

    index: int
    ecc_uncorrected: int | None = None  # volatile: since the driver loaded
    retired_pages_pending: bool | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    throttle_reasons: int | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None


def read_faults(nvml: ModuleType | None = None) -> list[GpuFaults]:
    """Error and link state of every GPU NVML sees; empty when NVML or its driver is absent."""
    return _each_gpu(nvml, _faults)


def _each_gpu(nvml: ModuleType | None, read: Callable[[ModuleType, int], T]) -> list[T]:
    """`read(lib, index)` of every GPU NVML sees; empty when NVML or its driver is absent.
    Initialises and shuts NVML down on each call, so no caller holds the driver between
    calls."""
    lib = nvml if nvml is not None else _pynvml
    if lib is None:
        return []
    try:
        lib.nvmlInit()
    except Exception:
        return []
    try:
        return [read(lib, index) for index in range(int(lib.nvmlDeviceGetCount()))]
    finally:
        lib.nvmlShutdown()


def _int(read: Callable[[], object]) -> int | None:
    value = _maybe(read)
    return None if value is None else int(value)


def _faults(lib: ModuleType, index: int) -> GpuFaults:
    dev = lib.nvmlDeviceGetHandleByIndex(index)
    try:
        _, _, pending, failed = lib.nvmlDeviceGetRemappedRows(dev)  # Ampere and later
        remap: tuple[bool | None, bool | None] = (bool(pending), bool(failed))
    except Exception:
        remap = (None, None)
    reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    retired = _int(lambda: lib.nvmlDeviceGetRetiredPagesPendingStatus(dev))
    return GpuFaults(
        index=index,
        ecc_uncorrected=_int(
            lambda: lib.nvmlDeviceGetTotalEccErrors(
                dev, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, lib.NVML_VOLATILE_ECC
            )
        ),
        retired_pages_pending=None if retired is None else bool(retired),
        remap_pending=remap[0],
        remap_failed=remap[1],
        throttle_reasons=None if reasons is None else _int(lambda: reasons(dev)),
        pcie_gen=_int(lambda: lib.nvmlDeviceGetCurrPcieLinkGeneration(dev)),
        pcie_gen_max=_int(lambda: lib.nvmlDeviceGetMaxPcieLinkGeneration(dev)),
        pcie_width=_int(lambda: lib.nvmlDeviceGetCurrPcieLinkWidth(dev)),
        pcie_width_max=_int(lambda: lib.nvmlDeviceGetMaxPcieLinkWidth(dev)),
    )
