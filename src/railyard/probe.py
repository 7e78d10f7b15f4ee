"""Which GPUs this machine has, through NVML when it is installed.

The one place railyard probes hardware: the ``local`` blueprint preset and the executors both
ask here.

NVML comes from the optional ``nvidia-ml-py`` package (module ``pynvml``); without it, or
without a driver, the machine reports no GPUs and a declared count (``--gpus 8``) is used.
API: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html
"""

from __future__ import annotations

import importlib
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
