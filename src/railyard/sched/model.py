"""Value types the scheduler reads: inventory, tenancy, jobs and the cluster state.

Everything here is immutable so a cycle can never change its input; the driver builds the
next state from the decisions it applied. Units are in the names (`_s`, `_gpus`, `_gb`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum, StrEnum

Placement = Mapping[str, tuple[int, ...]]
"""Node name -> GPU indices on that node."""


class NodeState(StrEnum):
    """Only READY nodes take new work; DOWN nodes lose the work they had."""

    READY = "ready"
    DRAINING = "draining"
    DRAINED = "drained"
    DOWN = "down"


class Level(IntEnum):
    """Topology levels; a larger value is a wider domain, so `max()` picks the loosest."""

    NODE = 0
    LEAF_GROUP = 1
    SCALABLE_UNIT = 2
    FABRIC = 3

    @property
    def label(self) -> str:
        return _LEVEL_LABELS[self]

    @classmethod
    def parse(cls, label: str) -> Level:
        for level, name in _LEVEL_LABELS.items():
            if name == label:
                return level
        raise ValueError(
            f"unknown topology level {label!r}; use one of {list(_LEVEL_LABELS.values())}"
        )


_LEVEL_LABELS = {
    Level.NODE: "node",
    Level.LEAF_GROUP: "leaf-group",
    Level.SCALABLE_UNIT: "scalable-unit",
    Level.FABRIC: "fabric",
}


class TopologyMode(StrEnum):
    REQUIRED = "required"
    PREFERRED = "preferred"


PULL_LIMIT_S = 3600.0
"""The longest an image may take to reach a job's nodes (the wrapper gives up pulling then:
`exec.containers.containerrun.PULL_TIMEOUT_S`); its time limit starts then at the latest."""


class PriorityClass(IntEnum):
    """Named priority classes; jobs carry the int so custom values stay possible."""

    LOW = 100
    NORMAL = 500
    HIGH = 1000
    CRITICAL = 10_000


@dataclass(frozen=True)
class Node:
    """A server. `path` holds topology labels from the top down, e.g. ("su2", "su2-lg5")."""

    name: str
    flavor: str
    gpus: int
    cpu_cores: int = 0
    mem_gb: float = 0.0
    path: tuple[str, ...] = ()
    nvlink_domains: tuple[tuple[int, ...], ...] = ()
    state: NodeState = NodeState.READY
    images: frozenset[str] = frozenset()
    """Container images already on the node: a job that runs in one prefers these nodes
    when all else is equal (its start skips the pull)."""
    features: frozenset[str] = frozenset()
    """Slurm's node features (a blueprint's): a job's --constraint becomes the set of nodes
    it may use at submit (`Job.only_nodes`); the cycle does not read them."""

    def __post_init__(self) -> None:
        if self.gpus < 0:
            raise ValueError(f"node {self.name}: gpus must be >= 0")
        if not self.nvlink_domains and self.gpus:
            object.__setattr__(self, "nvlink_domains", (tuple(range(self.gpus)),))
        seen = [g for d in self.nvlink_domains for g in d]
        if sorted(seen) != list(range(self.gpus)):
            raise ValueError(f"node {self.name}: nvlink_domains must partition 0..{self.gpus - 1}")

    def group(self, level: Level) -> tuple[str, ...]:
        """Key of the topology domain at `level` that holds this node."""
        if level is Level.NODE:
            return (*self.path, self.name)
        if level is Level.LEAF_GROUP:
            return self.path
        if level is Level.SCALABLE_UNIT:
            return self.path[:1]
        return ()


@dataclass(frozen=True)
class Queue:
    """A node of the tenancy tree (organisation, team, project...); jobs go to leaves.

    Limits are GPUs per flavor; a flavor missing from a limit map means "no limit".
    `priority_preemption`: its jobs may evict lower-priority jobs of the same queue and
    preemptible jobs anywhere (Kueue's `withinClusterQueue: LowerPriority`; off by default, as
    Slurm's `PreemptType=preempt/none`); reclaiming lent quota needs no opt-in. Like a Slurm
    partition, `default_time_s` is the time limit of a job that gives none (`DefaultTime`) and
    `max_time_s` the largest a job may ask for (`MaxTime`). The admin's bounds on what a job
    may claim for itself: `max_min_runtime_s` (protection from preemption after start) and
    `max_checkpoint_grace_s` (time to checkpoint when asked to stop). `idle_limit_s`: an
    interactive job (a shell, a notebook) whose user sent nothing for that long is stopped
    (JupyterHub's idle culler, a shell's `TMOUT`), so a session left open never holds GPUs.
    """

    name: str
    parent: str | None = None
    nominal_gpus: Mapping[str, int] = field(default_factory=dict)
    borrowing_limit_gpus: Mapping[str, int] = field(default_factory=dict)
    lending_limit_gpus: Mapping[str, int] = field(default_factory=dict)
    weight: float = 1.0
    priority_preemption: bool = False
    default_time_s: float | None = None
    max_time_s: float | None = None
    max_min_runtime_s: float | None = None
    max_checkpoint_grace_s: float | None = None
    idle_limit_s: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.weight < math.inf:
            raise ValueError(f"queue {self.name}: weight must be a finite number > 0")
        for name in (
            "default_time_s", "max_time_s", "max_min_runtime_s", "max_checkpoint_grace_s",
            "idle_limit_s",
        ):  # fmt: skip
            value = getattr(self, name)
            if value is not None and not 0 <= value < math.inf:
                raise ValueError(f"queue {self.name}: {name} must be finite and >= 0")


class DependencyKind(StrEnum):
    AFTER = "after"
    AFTER_OK = "afterok"
    AFTER_NOT_OK = "afternotok"
    AFTER_ANY = "afterany"
    AFTER_CORR = "aftercorr"  # an array task after the same index of another array, ok
    SINGLETON = "singleton"


@dataclass(frozen=True)
class Dependency:
    """One of Slurm's `--dependency` terms (rules in `sched.dependencies`)."""

    kind: DependencyKind
    job_ids: tuple[str, ...] = ()
    # after:ID+MINUTES: seconds after each named job started (or ended unstarted), in
    # `job_ids`' order; empty: no wait
    delays_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class TopologyRequirement:
    level: Level
    mode: TopologyMode = TopologyMode.REQUIRED


_ALIKE: dict[tuple[object, ...], tuple[object, ...]] = {}
_ALIKE_MAX = 16_384


def _interned(alike: tuple[object, ...]) -> tuple[object, ...]:
    """One shared tuple per distinct `Job.alike` in this process, so alike jobs hold the same
    object (a pass keys its memo on the object's identity: see `Pass.admit_in_order`). Bounded:
    past the bound it starts over, which costs only sharing, never correctness."""
    if len(_ALIKE) >= _ALIKE_MAX:
        _ALIKE.clear()
    return _ALIKE.setdefault(alike, alike)


@dataclass(frozen=True, slots=True)
class Job:
    """A gang of `workers` chunks, each needing `gpus_per_worker` GPUs (and `cpus_per_worker`
    cores, `mem_per_worker_gb` memory) on one node; with `distinct_nodes` every chunk is on a
    node of its own (Slurm's `--nodes`). A chunk is what the scheduler places; how many
    processes run in it is the executor's business (`--ntasks-per-node`).

    Lifecycle fields (read by `sched.lifecycle`, not by the cycle): `requeue` (Slurm's
    `--requeue`/`--no-requeue`: back to the queue after a node failure, up to `max_restarts`
    times), `array_max_running` (the `%N` of `--array`), `warn_before_s` (a warning signal that
    long before the time limit, Slurm's `--signal`), `attained_gpu_s` (service in earlier
    attempts), `nominated` (victims are stopping for it), `dependencies` (Slurm's
    `--dependency`, all of them or with `dependency_any` any one; `name` for `singleton`) and
    `hold` (scontrol hold: "user" or "admin"). `image`: the container image it runs in
    (placement prefers nodes that have it; its time limit starts once it is on the nodes).
    `begin_t_s`: sbatch's `--begin`, the earliest it may start; like Slurm's EligibleTime it
    moves to the moment a hold is released, and a job ages (starvation, greedy backfill's
    hold) only from then or its submission, whichever is later (`waiting_since_t_s`): held
    or not yet begun, it may not run, so it has not waited. `deadline_t_s`: sbatch's
    `--deadline`: once it could no longer end by then (now plus its time limit is later), it
    leaves the queue with end state DEADLINE.
    """

    id: str
    queue: str
    flavor: str
    workers: int = 1
    gpus_per_worker: int = 1
    cpus_per_worker: int = 0
    mem_per_worker_gb: float = 0.0
    distinct_nodes: bool = False
    user: str = "default"
    priority: int = 0
    preemptible: bool = False
    walltime_s: float | None = None
    topology: TopologyRequirement | None = None
    submit_t_s: float = 0.0
    min_runtime_s: float = 0.0
    checkpoint_grace_s: float = 0.0
    restart_count: int = 0
    max_restarts: int = 3
    requeue: bool = True
    array_parent: str | None = None
    array_index: int | None = None
    array_max_running: int | None = None
    warn_before_s: float | None = None
    attained_gpu_s: float = 0.0
    nominated: bool = False
    name: str = ""
    dependencies: tuple[Dependency, ...] = ()
    dependency_any: bool = False
    hold: str | None = None  # "user" or "admin": held until released
    interactive: bool = False  # a session (terminal, notebook): its queue's idle limit applies
    image: str | None = None
    begin_t_s: float | None = None
    deadline_t_s: float | None = None
    # sbatch --kill-on-invalid-dep=yes: once its dependency can never be met it is cancelled
    # (`lifecycle.step`'s `abandoned`), not left pending with DependencyNeverSatisfied
    kill_on_invalid_dep: bool = False
    # sbatch's --nodelist / --exclude: its nodes are among `only_nodes` (None: any) and none
    # of `never_nodes` (placement reads them through `Shape`)
    only_nodes: frozenset[str] | None = None
    never_nodes: frozenset[str] = frozenset()
    # Order among jobs submitted at the same instant: by number, not by string, so job 9 goes
    # before 10 and array task 4_2 before 4_10. Set once at creation. (Slots: with more than
    # 30 fields CPython stops sharing the keys of instance dicts, and every job took 1.5 KiB
    # and slowed each cycle by half on 15,000 jobs.)
    tie: tuple[int, str, int, str] = field(init=False, repr=False, compare=False)
    # Everything of the job itself that an admission decision reads (queue, shape, nodes,
    # priority), as one tuple made once and shared by alike jobs: a cycle keys its memo of
    # decisions on it for each of 10,000 pending jobs, and reading and hashing eleven fields
    # per job was a fifth of a cycle.
    alike: tuple[object, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.workers < 1 or self.gpus_per_worker < 0:
            raise ValueError(f"job {self.id}: workers must be >= 1 and gpus_per_worker >= 0")
        if self.cpus_per_worker < 0 or not self.mem_per_worker_gb >= 0:
            raise ValueError(f"job {self.id}: cpus_per_worker and mem_per_worker_gb must be >= 0")
        base = self.array_parent or self.id
        index = self.array_index if self.array_index is not None else -1
        object.__setattr__(self, "tie", (len(base), base, index, self.id))
        alike = (self.queue, self.flavor, self.workers, self.gpus_per_worker,
                 self.cpus_per_worker, self.mem_per_worker_gb, self.topology,
                 self.distinct_nodes, self.only_nodes, self.never_nodes, self.priority)  # fmt: skip
        object.__setattr__(self, "alike", _interned(alike))

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled for a sweep's worker process, where it must share `alike` with the jobs
        made there (`_unpickled_job`). Not `__setstate__`: Python 3.11.0 to 3.11.3 replace a
        frozen slotted dataclass's own `__setstate__` with theirs (CPython gh-104035)."""
        return _unpickled_job, (tuple(getattr(self, f.name) for f in fields(self)),)

    @property
    def gpus(self) -> int:
        return self.workers * self.gpus_per_worker

    @classmethod
    def with_total_gpus(
        cls, *, id: str, queue: str, flavor: str, gpus: int, gpus_per_node: int, **kw: object
    ) -> Job:
        """Split a total GPU count into a gang: one worker if it fits a node, else whole nodes."""
        if gpus <= gpus_per_node:
            return cls(id=id, queue=queue, flavor=flavor, workers=1, gpus_per_worker=gpus, **kw)  # type: ignore[arg-type]
        if gpus % gpus_per_node:
            raise ValueError(
                f"job {id}: {gpus} GPUs is not a whole number of {gpus_per_node}-GPU nodes"
            )
        return cls(
            id=id,
            queue=queue,
            flavor=flavor,
            workers=gpus // gpus_per_node,
            gpus_per_worker=gpus_per_node,
            **kw,  # type: ignore[arg-type]
        )


class StopCause(StrEnum):
    """Why a running job is being stopped; decides where it goes when it exits."""

    PREEMPTED = "Preempted"  # checkpoint handshake for another job: requeued
    NODE_DOWN = "NodeDown"  # a node of its placement died: requeued
    CANCELLED = "Cancelled"  # a user or admin cancelled it
    TIME_LIMIT = "TimeLimit"  # it reached its time limit: ends TIMEOUT
    IDLE_LIMIT = "IdleLimit"  # an interactive job idle past its queue's limit: ends TIMEOUT
    REQUEUED = "Requeued"  # scontrol requeue: pending again, one restart more


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A started job. `stop_cause` is set by the driver once a stop was asked for, and
    `preempt_for` names the job a preemption handshake was sent for; `warned` once the
    time-limit warning signal went out; `backfilled` if it started ahead of a reservation;
    `active_t_s` when its user last sent it anything (an interactive job; None: not since it
    started). `run_t_s`: when its own work began, after its image was on every node (None:
    at its start, or, for a job with an image, not yet: its time limit does not run while the
    image is pulled, as Pyxis's enroot import happens before the task runs, though from
    `PULL_LIMIT_S` after its start at the latest)."""

    job: Job
    placement: Placement
    start_t_s: float
    last_checkpoint_t_s: float | None = None
    preempt_for: str | None = None
    stop_cause: StopCause | None = None
    warned: bool = False
    backfilled: bool = False
    active_t_s: float | None = None
    run_t_s: float | None = None
    id: str = field(init=False, repr=False, compare=False)  # the job's: read very often
    gpus: int = field(init=False, repr=False, compare=False)  # held; asked for every cycle

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", self.job.id)
        object.__setattr__(self, "gpus", sum(len(g) for g in self.placement.values()))
        if self.preempt_for is not None and self.stop_cause is None:
            cause = StopCause.NODE_DOWN if self.preempt_for == "NodeDown" else StopCause.PREEMPTED
            object.__setattr__(self, "stop_cause", cause)

    @property
    def limit_from_t_s(self) -> float:
        """When its time limit began counting (while its image is pulled: when the pull
        must have ended)."""
        if self.run_t_s is not None:
            return self.run_t_s
        return self.start_t_s + PULL_LIMIT_S if self.job.image else self.start_t_s

    def lost_gpu_s(self, now_t_s: float) -> float:
        """GPU-seconds of work lost if stopped now: time since the last checkpoint (or start)."""
        since_t_s = max(self.start_t_s, self.last_checkpoint_t_s or self.start_t_s)
        return self.gpus * max(0.0, now_t_s - since_t_s)


@dataclass(frozen=True)
class Usage:
    """Decayed GPU-seconds per queue (every level of the tree) and per (leaf queue, user)."""

    queue_gpu_s: Mapping[str, float] = field(default_factory=dict)
    user_gpu_s: Mapping[tuple[str, str], float] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterState:
    """Everything one cycle looks at. Order of the sequences never changes the result."""

    nodes: Sequence[Node]
    queues: Sequence[Queue]
    pending: Sequence[Job] = ()
    running: Sequence[RunningJob] = ()
    usage: Usage = field(default_factory=Usage)
    runtime_history_s: Mapping[tuple[str, str | None], float] = field(default_factory=dict)
    """Predicted run times from each queue's history (see `limits.Estimates`)."""

    def __post_init__(self) -> None:
        for name in ("nodes", "queues", "pending", "running"):
            object.__setattr__(self, name, tuple(getattr(self, name)))


def waiting_since_t_s(job: Job) -> float:
    """When a job began to wait, for every rule that ages it: its submission or its
    `begin_t_s`, whichever is later. A job submitted with `--begin` a week out, or held for a
    week, is not starving the moment it may run (it would jump every queue)."""
    begin = job.begin_t_s
    return job.submit_t_s if begin is None or begin < job.submit_t_s else begin


def starving_since_t_s(job: Job) -> float:
    """The clock the starvation limit reads: `waiting_since_t_s` plus the time the job has
    run in earlier attempts (`attained_gpu_s` over its GPUs), so that what ages a job is the
    time it waited, not its time in the system. A job sliced or preempted after running
    for days did not wait those days: read from its submission, on Philly-derived traces at
    load 1 most jobs were past a 7-day limit, and the starving tier (oldest first, run to
    the end) made `las` FIFO (issue 56). A job that never ran ages as before."""
    since = waiting_since_t_s(job)
    attained, gpus = job.attained_gpu_s, job.workers * job.gpus_per_worker
    return since + attained / gpus if attained > 0 and gpus > 0 else since


def begins_again_t_s(begin_t_s: float | None, now_t_s: float) -> float:
    """The begin time of a pending job free to run from now (a hold released, a dependency
    met or removed): now, or its own `--begin` if later. Slurm sets EligibleTime so; the job
    ages from there (`waiting_since_t_s`)."""
    return now_t_s if begin_t_s is None or begin_t_s < now_t_s else begin_t_s


def _unpickled_job(state: tuple[object, ...]) -> Job:
    """A pickled `Job` again, sharing `alike` with this process's alike jobs."""
    job = object.__new__(Job)
    for f, value in zip(fields(Job), state, strict=True):
        object.__setattr__(job, f.name, value)
    object.__setattr__(job, "alike", _interned(job.alike))
    return job
