"""Which of the allocation's GPUs an in-job ``srun`` step gets (``--gpus``, ``--gres=gpu:N``,
``--gpus-per-node``, ``--gpus-per-task``), and the locks that keep the concurrent steps of one
job on different GPUs, as Slurm gives each step its own.

A step takes each GPU it uses by an exclusive ``flock`` on a file in the job's steps directory
(the user's own), held by its ``srun`` until it ends (a killed srun's locks end with it). When
too few are free, srun waits for them and says so, as srun 22.05 does ("step creation
temporarily disabled, retrying"). A step that names no GPU option takes all the job's GPUs of
its nodes and no lock, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass, replace
from pathlib import Path

from railyard.exec.task.launch import NodeAlloc


class StepGpuError(ValueError):
    """A GPU request no step of this allocation could ever get."""


@dataclass(frozen=True)
class GpuRequest:
    """One of srun's GPU spellings, as a count: for the whole step, per node, or per task."""

    per_step: int | None = None
    per_node: int | None = None
    per_task: int | None = None


def _count(option: str, value: str) -> int:
    """``N`` or ``TYPE:N`` (the type is the job's: its flavor was chosen at submit)."""
    count = value.rpartition(":")[2]
    if not count.isdigit():
        raise StepGpuError(f"{option}={value}: expected [TYPE:]N, e.g. {option}=1")
    return int(count)


def request_of(
    gpus: str | None, gres: str | None, gpus_per_node: str | None, gpus_per_task: str | None
) -> GpuRequest | None:
    """The step's GPU request from srun's options; None when it names none."""
    if gres == "none":  # Slurm's way to ask a step for no GPU, as gpu:0
        gres = "gpu:0"
    if gres is not None:
        kind, _, rest = gres.partition(":")
        if kind != "gpu" or "," in gres:
            raise StepGpuError(f"--gres={gres}: only gpu[:TYPE]:N is known here")
        gpus_per_node = rest or "1"
    if gpus is gpus_per_node is gpus_per_task is None:
        return None
    return GpuRequest(
        per_step=_count("--gpus", gpus) if gpus is not None else None,
        per_node=_count("--gpus-per-node", gpus_per_node) if gpus_per_node is not None else None,
        per_task=_count("--gpus-per-task", gpus_per_task) if gpus_per_task is not None else None,
    )


def needs(request: GpuRequest, nodes: list[NodeAlloc]) -> list[int]:
    """How many GPUs each node of the step takes; refused if more than the job has there."""
    if request.per_task is not None:
        wanted = [n.ntasks * request.per_task for n in nodes]
    elif request.per_node is not None:
        wanted = [request.per_node] * len(nodes)
    else:
        base, extra = divmod(request.per_step or 0, len(nodes))
        wanted = [base + (1 if i < extra else 0) for i in range(len(nodes))]
    for node, want in zip(nodes, wanted, strict=True):
        if want > len(node.gpus):
            raise StepGpuError(
                f"the step asks for {want} GPU(s) on {node.name}, where the job has "
                f"{len(node.gpus)} (hint: fewer GPUs or tasks per step)"
            )
    return wanted


def take(nodes: list[NodeAlloc], wanted: list[int], lock_dir: str | None) -> list[NodeAlloc] | None:
    """The step's nodes with the GPUs it got, their locks held by this process until it
    ends; None (nothing held) while other steps hold too many of them."""
    held: list[int] = []
    out = []
    for node, want in zip(nodes, wanted, strict=True):
        mine: list[int] = []
        for gpu in node.gpus:
            if len(mine) == want:
                break
            if lock_dir is None:
                mine.append(gpu)
                continue
            fd = _try_lock(Path(lock_dir, f".gpu-{node.name}-{gpu}.lock"))
            if fd is not None:
                held.append(fd)
                mine.append(gpu)
        if len(mine) < want:
            for fd in held:
                os.close(fd)
            return None
        out.append(replace(node, gpus=tuple(mine)))
    return out


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        with contextlib.suppress(OSError):
            os.close(fd)
        return None
    return fd
