"""Pure helpers a driver calls between cycles: usage decay and arrays.

They live here, not in the driver, so the simulator and the live control plane account in
exactly the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from railyard.sched.model import Job, Queue, RunningJob, Usage


def queue_path(queues: Iterable[Queue], leaf: str) -> tuple[str, ...]:
    """Queue names from the root down to `leaf`."""
    parent = {q.name: q.parent for q in queues}
    out = [leaf]
    while (p := parent.get(out[-1])) is not None:
        if p in out:
            raise ValueError(f"queue cycle through {p}")
        out.append(p)
    return tuple(reversed(out))


def accrue_usage(
    usage: Usage,
    running: Sequence[RunningJob],
    queues: Sequence[Queue],
    dt_s: float,
    half_life_s: float,
) -> Usage:
    """Decay usage by half-life over `dt_s`, then add GPUs x dt of the running jobs.

    Every queue on a job's path and its (leaf queue, user) pair are charged, so fair share can
    compare usage level by level.
    """
    if dt_s < 0 or half_life_s <= 0:
        raise ValueError("dt_s must be >= 0 and half_life_s > 0")
    factor = 0.5 ** (dt_s / half_life_s)
    by_queue = {k: v * factor for k, v in usage.queue_gpu_s.items()}
    by_user = {k: v * factor for k, v in usage.user_gpu_s.items()}
    gpus_by_user: dict[tuple[str, str], int] = {}  # sum whole GPUs first: one charge per pair
    for r in running:
        key = (r.job.queue, r.job.user)
        gpus_by_user[key] = gpus_by_user.get(key, 0) + r.gpus
    gpus_by_queue: dict[str, int] = {}
    for (q, _user), gpus in gpus_by_user.items():
        gpus_by_queue[q] = gpus_by_queue.get(q, 0) + gpus
    for key, gpus in gpus_by_user.items():
        by_user[key] = by_user.get(key, 0.0) + gpus * dt_s
    paths = {q: queue_path(queues, q) for q in gpus_by_queue}
    for q, gpus in gpus_by_queue.items():
        for name in paths[q]:
            by_queue[name] = by_queue.get(name, 0.0) + gpus * dt_s
    return Usage(queue_gpu_s=by_queue, user_gpu_s=by_user)


def expand_array(job: Job, indices: Iterable[int]) -> list[Job]:
    """An array job becomes independent jobs `<id>_<index>` (Slurm's naming)."""
    return [replace(job, id=f"{job.id}_{i}", array_parent=job.id, array_index=i) for i in indices]
