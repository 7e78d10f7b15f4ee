"""What the simulator runs: jobs as a trace records them (arrival, size, how long they ran).

Loaders and the synthetic generator both produce a `Workload`, so every policy comparison runs
on the same list of jobs whatever its origin.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from railyard.sched import Job

_UNBOUNDED_RESTARTS = 1 << 30


class FinalState(StrEnum):
    """How the job ended in the trace; the simulator replays it (a failed job fails again)."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job: `runtime_s` of work on `gpus` GPUs, arriving at `submit_s`; `cpus` cores and
    `mem_gb` memory for the whole job (0: asks for none), split evenly over its workers."""

    id: str
    submit_s: float
    gpus: int
    runtime_s: float
    queue: str = "default"
    user: str = "default"
    priority: int = 0
    walltime_s: float | None = None
    preemptible: bool = False
    state: FinalState = FinalState.COMPLETED
    array_parent: str | None = None
    array_index: int | None = None
    array_max_running: int | None = None
    max_restarts: int | None = None  # None: requeued after every node failure
    cpus: int = 0
    mem_gb: float = 0.0
    interactive: bool = False  # a session (shell, notebook): its queue's idle limit applies
    active_s: float | None = None  # its user works in it this long after start, then leaves
    # it open (None: for all of `runtime_s`); an idle limit may end it before `runtime_s`
    pool: str | None = None  # the node pool it runs on (`blueprint.pools`); None: unpooled
    image: str | None = None  # the container image it runs in (`sim.images`)
    deadline_s: float | None = None  # sbatch's --deadline, seconds from the trace's start

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"job {self.id}: gpus must be >= 1")
        if self.runtime_s < 0 or self.submit_s < 0:
            raise ValueError(f"job {self.id}: runtime_s and submit_s must be >= 0")
        if self.cpus < 0 or not self.mem_gb >= 0:
            raise ValueError(f"job {self.id}: cpus and mem_gb must be >= 0")
        if self.active_s is not None and not self.active_s >= 0:
            raise ValueError(f"job {self.id}: active_s must be >= 0")
        if self.deadline_s is not None and not self.deadline_s > self.submit_s:
            raise ValueError(f"job {self.id}: deadline_s must be after submit_s")


@dataclass(frozen=True)
class Workload:
    """Jobs sorted by submit time (starting at 0), plus what a loader had to leave out."""

    name: str
    jobs: tuple[TraceJob, ...]
    skipped: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, name: str, jobs: list[TraceJob], skipped: dict[str, int] | None = None) -> Workload:
        """Sort by (submit, id) and shift submit times so the first job arrives at 0."""
        jobs = sorted(jobs, key=lambda j: (j.submit_s, j.id))
        t0 = jobs[0].submit_s if jobs else 0.0
        if t0:
            jobs = [_shift(j, t0) for j in jobs]
        return cls(name, tuple(jobs), dict(skipped or {}))

    @property
    def queues(self) -> list[str]:
        return sorted({j.queue for j in self.jobs})

    def gpu_s(self) -> float:
        return sum(j.gpus * j.runtime_s for j in self.jobs)


def _shift(job: TraceJob, t0: float) -> TraceJob:
    return replace(job, submit_s=job.submit_s - t0)


def scheduler_job(t: TraceJob, flavor: str, workers: int, gpw: int, grace_s: float) -> Job:
    """A trace job as the scheduler sees it: the trace finished it, so node failures requeue
    it however often they strike, unless the trace says otherwise. Its cores and memory are
    split evenly over its workers (cores rounded up), which the scheduler accounts per node."""
    return Job(
        id=t.id,
        queue=t.queue,
        flavor=flavor,
        workers=workers,
        gpus_per_worker=gpw,
        cpus_per_worker=-(-t.cpus // workers),
        mem_per_worker_gb=t.mem_gb / workers,
        user=t.user,
        priority=t.priority,
        preemptible=t.preemptible,
        walltime_s=t.walltime_s,
        submit_t_s=t.submit_s,
        checkpoint_grace_s=grace_s,
        max_restarts=_UNBOUNDED_RESTARTS if t.max_restarts is None else t.max_restarts,
        array_parent=t.array_parent,
        array_index=t.array_index,
        array_max_running=t.array_max_running,
        interactive=t.interactive,
        image=t.image,
        deadline_t_s=t.deadline_s,
    )
