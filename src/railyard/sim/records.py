"""What a simulation run leaves behind: one record per job, the timeline and counters.
`metrics.summarize` reads them; nothing here knows how the run was driven."""

from __future__ import annotations

from dataclasses import dataclass, field

from railyard.sim.workload import TraceJob


@dataclass(slots=True)
class JobRecord:
    """What happened to one job; metrics are computed from these.

    `state`: waiting | pending | running | completed | failed | cancelled | timeout |
    node_fail | rejected (can never run here).
    """

    trace: TraceJob
    gpus: int
    state: str = "waiting"
    first_start_t_s: float | None = None
    end_t_s: float | None = None
    restarts: int = 0
    preemptions: int = 0
    failures: int = 0
    multi_node_starts: int = 0
    one_leaf_group_starts: int = 0
    one_su_starts: int = 0
    idle_stopped: bool = False  # a session its queue's idle limit ended
    cold_starts: int = 0  # starts that waited for its image to reach a node
    pull_s: float = 0.0  # seconds its starts waited for its image, over all attempts
    lost_gpu_s: float = 0.0  # GPU-seconds of work its evictions and failures threw away


@dataclass
class RunLog:
    """Raw output of a run: job records, the timeline and counters."""

    total_gpus: int
    records: dict[str, JobRecord]
    timeline: list[tuple[float, int, int, int]]  # (t_s, busy GPUs, pending jobs, down GPUs)
    queue_gpu_s: dict[str, float]
    weights: dict[str, float]
    useful_gpu_s: float
    allocated_gpu_s: float
    lost_gpu_s: float
    checkpoints: int
    node_failures: int
    cycles: int
    events: int
    end_t_s: float
    event_log: list[tuple[float, str, str]] = field(default_factory=list)
    health: dict[str, float | None] | None = None  # checks, their GPU time, slow nodes found
