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


def resolve_gpus(declared: int | None, nvml: ModuleType | None = None) -> int:
    """The node's GPU count: the declared one wins (so a CPU machine can pose as a GPU node),
    else what NVML reports."""
    if declared is not None:
        if declared < 0:
            raise ValueError(f"declared GPU count {declared} < 0")
        return declared
    return len(detect_gpus(nvml))


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
    lib = nvml if nvml is not None else _pynvml
    if lib is None:
        return []
    try:
        lib.nvmlInit()
    except Exception:
        return []
    try:
        return [_reading(lib, index) for index in range(int(lib.nvmlDeviceGetCount()))]
    finally:
        lib.nvmlShutdown()


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
