"""Rows of the store <-> value types of the scheduler core.

The scheduler never sees the database; the service loop reads rows, converts them here, runs
a cycle and writes the decisions back. Usage is stored under string keys so one table holds
both levels: ``queue:<name>`` and ``user:<queue>/<user>``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol

from railyard.client.bounds import (
    MAX_WEIGHT,
    MIN_WEIGHT,
)
from railyard.control.store.tables import JobRow, JobState, NodeRow, QueueRow, UsageRow
from railyard.sched import (
    Job,
    Level,
    Node,
    NodeState,
    Queue,
    RunningJob,
    StartReason,
    StopCause,
    TopologyMode,
    TopologyRequirement,
    Usage,
)
from railyard.sched.dependencies import parse_dependency
from railyard.sched.model import Dependency, DependencyKind

log = logging.getLogger("railyard.loop")


def to_node(row: NodeRow) -> Node:
    return Node(
        name=row.name,
        flavor=row.flavor,
        gpus=row.gpus,
        cpu_cores=row.cpu_cores,
        mem_gb=row.mem_gb,
        path=tuple(row.path),
        state=NodeState(row.state),
        images=frozenset(row.images or ()),
        features=frozenset(row.features or ()),
    )


def to_queue(row: QueueRow) -> Queue:
    return Queue(
        name=row.name,
        parent=row.parent,
        nominal_gpus=dict(row.nominal_gpus),
        borrowing_limit_gpus=dict(row.borrowing_limit_gpus),
        lending_limit_gpus=dict(row.lending_limit_gpus),
        weight=safe_weight(row.name, row.weight),
        priority_preemption=row.priority_preemption,
        default_time_s=row.default_time_s,
        max_time_s=row.max_time_s,
        max_min_runtime_s=row.max_min_runtime_s,
        max_checkpoint_grace_s=row.max_checkpoint_grace_s,
        idle_limit_s=row.idle_limit_s,
    )


def safe_weight(queue: str, weight: float) -> float:
    """The API keeps weights within [MIN_WEIGHT, MAX_WEIGHT]; a row written before it did (or
    by hand) is clamped into that range here, so one queue cannot stop every cycle."""
    if math.isfinite(weight) and MIN_WEIGHT <= weight <= MAX_WEIGHT:
        return weight
    safe = min(max(weight, MIN_WEIGHT), MAX_WEIGHT) if not math.isnan(weight) else 1.0
    log.warning("queue %s: weight %r is out of range; scheduling with %r", queue, weight, safe)
    return safe


class JobFields(Protocol):
    """The columns a cycle needs: a ``JobRow`` or a lighter row of :data:`SCHED_COLUMNS`."""

    id: str
    queue: str
    flavor: str
    workers: int
    gpus_per_worker: int
    cpus_per_worker: int
    mem_per_worker_gb: float
    distinct_nodes: bool
    priority: int
    preemptible: bool
    walltime_s: float | None
    topology_level: str | None
    topology_mode: str | None
    submit_t_s: float
    min_runtime_s: float
    checkpoint_grace_s: float
    restart_count: int
    max_restarts: int
    array_parent: str | None
    array_index: int | None
    array_max_running: int | None
    warn_before_s: float | None
    attained_gpu_s: float
    nominated: bool
    state: str
    reason: str
    placement: dict[str, list[int]] | None
    start_t_s: float | None
    last_checkpoint_t_s: float | None
    preempt_for: str | None
    stop_cause: str | None
    warned: bool
    hold: str | None
    name: str
    dependency: str | None
    terminal: str
    active_t_s: float | None
    image: str | None
    run_t_s: float | None
    begin_t_s: float | None
    deadline_t_s: float | None
    only_nodes: list[str] | None
    never_nodes: list[str] | None
    kill_on_invalid_dep: bool


SCHED_NAMES: tuple[str, ...] = (
    "id", "user_id", "queue", "flavor", "workers", "gpus_per_worker", "cpus_per_worker",
    "mem_per_worker_gb", "distinct_nodes", "priority", "preemptible", "walltime_s",
    "topology_level", "topology_mode", "submit_t_s", "min_runtime_s", "checkpoint_grace_s",
    "restart_count", "max_restarts", "array_parent", "array_index", "array_max_running",
    "warn_before_s", "warned", "attained_gpu_s", "nominated", "hold", "name", "dependency",
    "state", "reason", "placement", "start_t_s", "last_checkpoint_t_s", "preempt_for",
    "stop_cause", "updated_t_s", "terminal", "active_t_s", "image", "run_t_s", "begin_t_s",
    "deadline_t_s", "only_nodes", "never_nodes", "kill_on_invalid_dep",
)  # fmt: skip
SCHED_COLUMNS: tuple[Any, ...] = tuple(getattr(JobRow, name) for name in SCHED_NAMES)
"""Selected without the ORM (no identity map, no large command/env/script columns): a cycle
over ten thousand pending jobs should not build ten thousand ORM objects."""


def job_of_columns(values: Sequence[Any], user: str) -> Job:
    """:func:`to_job` of a row of :data:`SCHED_COLUMNS` as a plain tuple: a third of its time
    (a new 10,000-task array's first step spent 0.3 s in ``to_job``, mostly reading a
    ``Row``'s attributes one by one; cProfile)."""
    return _job(dict(zip(SCHED_NAMES, values, strict=True)), user)


def to_job(row: JobFields, user: str) -> Job:
    return _job({name: getattr(row, name) for name in _JOB_NAMES}, user)


_JOB_NAMES = (
    "id", "queue", "flavor", "workers", "gpus_per_worker", "cpus_per_worker",
    "mem_per_worker_gb", "distinct_nodes", "priority", "preemptible", "walltime_s",
    "topology_level", "topology_mode", "submit_t_s", "min_runtime_s", "checkpoint_grace_s",
    "restart_count", "max_restarts", "array_parent", "array_index", "array_max_running",
    "warn_before_s", "attained_gpu_s", "nominated", "hold", "name", "dependency", "terminal",
    "image", "begin_t_s", "deadline_t_s", "only_nodes", "never_nodes", "kill_on_invalid_dep",
)  # fmt: skip


def _job(f: Mapping[str, Any], user: str) -> Job:
    """The scheduler's job from a row's columns by name (both readers above)."""
    level = f["topology_level"]
    return Job(
        id=f["id"],
        queue=f["queue"],
        flavor=f["flavor"],
        workers=f["workers"],
        gpus_per_worker=f["gpus_per_worker"],
        cpus_per_worker=f["cpus_per_worker"],
        mem_per_worker_gb=f["mem_per_worker_gb"],
        distinct_nodes=f["distinct_nodes"],
        user=user,
        priority=f["priority"],
        preemptible=f["preemptible"],
        walltime_s=f["walltime_s"],
        topology=_topology(level, f["topology_mode"]) if level else None,
        submit_t_s=f["submit_t_s"],
        min_runtime_s=f["min_runtime_s"],
        checkpoint_grace_s=f["checkpoint_grace_s"],
        restart_count=f["restart_count"],
        max_restarts=f["max_restarts"],
        array_parent=f["array_parent"],
        array_index=f["array_index"],
        array_max_running=f["array_max_running"],
        warn_before_s=f["warn_before_s"],
        attained_gpu_s=f["attained_gpu_s"],
        nominated=f["nominated"],
        hold=f["hold"],
        name=f["name"],
        interactive=bool(f["terminal"]),
        image=f["image"],
        begin_t_s=f["begin_t_s"],
        deadline_t_s=f["deadline_t_s"],
        only_nodes=None if f["only_nodes"] is None else frozenset(f["only_nodes"]),
        never_nodes=frozenset(f["never_nodes"] or ()),
        kill_on_invalid_dep=bool(f["kill_on_invalid_dep"]),
        **_dependencies(f["dependency"]),
    )


def _topology(level: str, mode: str | None) -> TopologyRequirement:
    return TopologyRequirement(Level.parse(level), TopologyMode(mode or "required"))


def _dependencies(text: str | None) -> dict[str, Any]:
    """Job fields from a stored ``--dependency``: parsed once per distinct text, not on every
    read of every pending job (a loop step reads them all, an array's tasks share one)."""
    if not text:
        return {}
    dependencies, any_of = _parsed_dependency(text)
    return {"dependencies": dependencies, "dependency_any": any_of}


@lru_cache(maxsize=4096)
def _parsed_dependency(text: str) -> tuple[tuple[Dependency, ...], bool]:
    """One that no longer parses (it was checked at submit) can never be satisfied, rather
    than stopping the loop. Kept by text: the terms are immutable, and the text is what the
    store keeps (``SLURM_JOB_DEPENDENCY`` shows it as given)."""
    try:
        return parse_dependency(text)
    except ValueError:
        return (Dependency(DependencyKind.AFTER_OK, ("?",)),), False


def stop_cause(state: str, stored: str | None) -> StopCause | None:
    """Why a live job is being stopped (see `sched.lifecycle.settle`): the cause written with
    the stop. A stopping row without a known one (written by hand) is taken as its state's
    usual cause. The row's reason is for display and never read here."""
    if state == JobState.PREEMPTING.value:
        usual = StopCause.PREEMPTED
    elif state == JobState.CANCELLING.value:
        usual = StopCause.CANCELLED
    else:
        return None
    return StopCause(stored) if stored in _CAUSES else usual


_CAUSES = frozenset(c.value for c in StopCause)


def to_running(row: JobFields, user: str) -> RunningJob:
    placement = {node: tuple(gpus) for node, gpus in (row.placement or {}).items()}
    return RunningJob(
        job=to_job(row, user),
        placement=placement,
        start_t_s=row.start_t_s if row.start_t_s is not None else row.submit_t_s,
        last_checkpoint_t_s=row.last_checkpoint_t_s,
        preempt_for=row.preempt_for,
        stop_cause=stop_cause(row.state, row.stop_cause),
        warned=row.warned,
        backfilled=row.reason.startswith(StartReason.BACKFILL.value),
        active_t_s=row.active_t_s,
        run_t_s=row.run_t_s,
    )


def usage_from_rows(rows: Iterable[UsageRow]) -> Usage:
    queues: dict[str, float] = {}
    users: dict[tuple[str, str], float] = {}
    for row in rows:
        kind, _, key = row.key.partition(":")
        if kind == "queue":
            queues[key] = row.gpu_s
        elif kind == "user":
            queue, _, user = key.rpartition("/")
            users[(queue, user)] = row.gpu_s
    return Usage(queue_gpu_s=queues, user_gpu_s=users)


def usage_keys(usage: Usage) -> Mapping[str, float]:
    """The store's keys for every usage figure."""
    out = {f"queue:{name}": gpu_s for name, gpu_s in usage.queue_gpu_s.items()}
    out.update({f"user:{q}/{u}": gpu_s for (q, u), gpu_s in usage.user_gpu_s.items()})
    return out
