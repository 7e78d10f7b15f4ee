"""Checkpoint size and time, failure rate, optimal checkpoint interval and goodput.

Large jobs fail often (Llama 3 405B saw an interruption every three hours on 16,384 GPUs), so
how long a checkpoint takes and how often to write one decide how much of a cluster's time is
useful. These functions are pure and small because the simulator calls them for every job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from railyard.blueprint.models import StorageSystem

# Bytes per parameter in a checkpoint: bf16 weights (2); a resumable checkpoint adds the fp32
# master copy (4) and Adam's two fp32 moments (8) = 14 (BigScience tr11-176B notes: 2.3 TB for
# BLOOM-176B, "bf16 weights + fp32 master + Adam").
WEIGHTS_ONLY_BYTES = 2
WITH_OPTIMIZER_BYTES = 14

# Llama 3 405B pre-training: 419 unexpected interruptions in 54 days on 16,384 H100 GPUs
# (Dubey et al. 2024, arXiv 2407.21783, section 3.3.4).
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16384
FAILURES_PER_GPU_HOUR = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * 24 * LLAMA3_GPUS)


def checkpoint_bytes(params: float, *, with_optimizer: bool = True) -> float:
    """Checkpoint size: 14 bytes per parameter with optimizer state, 2 for weights only."""
    return params * (WITH_OPTIMIZER_BYTES if with_optimizer else WEIGHTS_ONLY_BYTES)


def storage_bandwidth_bytes_s(storage: StorageSystem, nodes: int, *, write: bool) -> float:
    """What a job of ``nodes`` nodes gets: nodes x per-client bandwidth, capped by the aggregate."""
    aggregate = storage.write_gbyte_s if write else storage.read_gbyte_s
    return min(aggregate, nodes * storage.per_client_gbyte_s) * 1e9


def write_time_s(size_bytes: float, storage: StorageSystem, nodes: int) -> float:
    """Time to write a checkpoint, all nodes writing their shards in parallel."""
    return size_bytes / storage_bandwidth_bytes_s(storage, nodes, write=True)


def restore_time_s(size_bytes: float, storage: StorageSystem, nodes: int) -> float:
    """Time to read a checkpoint back at restart."""
    return size_bytes / storage_bandwidth_bytes_s(storage, nodes, write=False)


def job_failure_rate_per_s(gpus: int, per_gpu_hour: float = FAILURES_PER_GPU_HOUR) -> float:
    """Interruptions per second of a job: failures are independent per GPU, so N x the rate."""
    return gpus * per_gpu_hour / 3600.0


def mtbf_s(gpus: int, per_gpu_hour: float = FAILURES_PER_GPU_HOUR) -> float:
    """Mean time between interruptions of a job of ``gpus`` GPUs."""
    return 1.0 / job_failure_rate_per_s(gpus, per_gpu_hour)


def young_interval_s(checkpoint_s: float, mtbf: float) -> float:
    """Compute time between checkpoints, sqrt(2 C M) (Young 1974, CACM 17(9))."""
    return math.sqrt(2.0 * checkpoint_s * mtbf)


def daly_interval_s(checkpoint_s: float, mtbf: float) -> float:
    """Daly's higher-order optimum (Daly 2006, Future Gener. Comput. Syst. 22(3), eq. 37).

    sqrt(2 C M) [1 + (1/3) sqrt(C / 2M) + (1/9) (C / 2M)] - C for C < 2M, else M.
    """
    if checkpoint_s >= 2.0 * mtbf:
        return mtbf
    x = checkpoint_s / (2.0 * mtbf)
    return math.sqrt(2.0 * checkpoint_s * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - checkpoint_s


@dataclass(frozen=True, slots=True)
class Goodput:
    """Expected useful fraction of a job's wall time and where the rest goes (fractions)."""

    interval_s: float
    useful: float
    checkpointing: float
    rework: float
    restarts: float
    failures: float  # expected interruptions over the job

    @property
    def wall_time_factor(self) -> float:
        """Wall time over failure-free compute time."""
        return math.inf if self.useful <= 0 else 1.0 / self.useful


def goodput(
    gpus: int,
    work_s: float,
    checkpoint_s: float,
    restart_s: float,
    *,
    interval_s: float | None = None,
    per_gpu_hour: float = FAILURES_PER_GPU_HOUR,
) -> Goodput:
    """Expected goodput of a job needing ``work_s`` failure-free seconds.

    First-order model (as in Young 1974): each interval of compute tau is followed by a
    checkpoint C; each failure loses on average half a segment, (tau + C)/2, plus the restart R
    (scheduling, loading, restore). Per unit of wall time: C/(tau + C) checkpointing,
    lambda ((tau + C)/2 + R) lost to failures. The interval defaults to Young's optimum.
    """
    rate = job_failure_rate_per_s(gpus, per_gpu_hour)
    tau = interval_s if interval_s is not None else young_interval_s(checkpoint_s, 1.0 / rate)
    tau = max(tau, 1e-9)
    checkpointing = checkpoint_s / (tau + checkpoint_s)
    rework = rate * (tau + checkpoint_s) / 2.0
    restarts = rate * restart_s
    useful = max(0.0, 1.0 - checkpointing - rework - restarts)
    wall_s = work_s / useful if useful > 0 else math.inf
    return Goodput(tau, useful, checkpointing, rework, restarts, rate * wall_s)
