"""Side effects: starting, signalling and watching training processes.

:mod:`railyard.exec.protocol` is the contract every executor honours (stdlib only);
:class:`LocalExecutor` runs jobs on this machine.

Every rank of every job starts :mod:`railyard.exec.task.wrapper`, a fresh interpreter that imports
this package first: so every name here is imported on first use (PEP 562), not up front, and
a wrapper pays only for the few modules it needs (about 60 ms less per launch); even
``typing`` is left out (``TYPE_CHECKING = False``, which mypy reads as typing's).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: importing typing would cost every rank ~5 ms
if TYPE_CHECKING:
    from typing import Any

    from railyard.exec.local import LocalExecutor
    from railyard.exec.protocol import (
        Executor,
        ExecutorError,
        ExitReport,
        JobHandle,
        LaunchSpec,
        Outcome,
        WorkerHandle,
    )
    from railyard.exec.task.nccl import nccl_env
    from railyard.probe import GpuInfo, detect_gpus, resolve_gpus

_PROTOCOL = ("Executor", "ExecutorError", "ExitReport", "JobHandle", "LaunchSpec", "Outcome")
_LAZY = {
    **dict.fromkeys((*_PROTOCOL, "WorkerHandle"), "railyard.exec.protocol"),
    "LocalExecutor": "railyard.exec.local",
    "nccl_env": "railyard.exec.task.nccl",
    "GpuInfo": "railyard.probe",
    "detect_gpus": "railyard.probe",
    "resolve_gpus": "railyard.probe",
}

__all__ = [
    "Executor",
    "ExecutorError",
    "ExitReport",
    "GpuInfo",
    "JobHandle",
    "LaunchSpec",
    "LocalExecutor",
    "Outcome",
    "WorkerHandle",
    "detect_gpus",
    "nccl_env",
    "resolve_gpus",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
