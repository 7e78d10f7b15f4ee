"""Side effects: starting, signalling and watching training processes.

:mod:`railyard.exec.protocol` is the contract every executor honours (stdlib only);
:class:`LocalExecutor` runs jobs on this machine.
"""

from railyard.exec.local import LocalExecutor
from railyard.exec.nccl import nccl_env
from railyard.exec.protocol import (
    Executor,
    ExecutorError,
    ExitReport,
    JobHandle,
    LaunchSpec,
    Outcome,
    WorkerHandle,
)
from railyard.probe import GpuInfo, detect_gpus, resolve_gpus

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
