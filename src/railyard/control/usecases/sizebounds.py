"""Every size a user types is bounded at submit by what the cluster could ever run.

A job of 3,000 tasks on one node was accepted (up to 1,048,576 were) and cost the loop
~0.15 s per rank while another user's job waited 452 s (issue 52); 1,638 jobs no node could
hold waited "Unschedulable" without naming why (issue 60). :func:`check_sizes` refuses at
submit, with one line naming the bound, a job whose tasks on one node, tasks in all, CPUs on
one node or array tasks exceed what the largest node of its flavor, all of them together, or
the site (:class:`SiteLimits`, ``railyard up --max-tasks-per-job`` / ``--max-array-size``)
could ever hold. GPUs per node, nodes, cores and memory per node are checked beside it in
``admission`` (``_check_shape``, ``sched.feasible.over_every_node``). Every way in (the route,
the fast submit, the group commit, a batch, an array, the CLI through the API) admits through
``admission.admit``, so every one applies them.

The cluster is the nodes the server knows now, in every state (a drained or down node may
come back): on Ray, nodes join later, and until one of a flavor has joined only the site's
limits bound a job of it. When the cluster shrinks (a node leaves the nodes table), jobs
already admitted keep their size: the loop's feasibility check (``sched.feasible``) marks one
no node left could hold ``Unschedulable``, and it waits with that reason, never started and
never dropped, until such nodes come back or it is cancelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from railyard.client.bounds import DEFAULT_MAX_TASKS_PER_JOB, MAX_JOB_GPUS
from railyard.client.values import MAX_ARRAY_TASKS
from railyard.control.errors import Invalid
from railyard.control.submission import JobSubmit
from railyard.sched.model import Node

MAX_NODE_CPUS = MAX_JOB_GPUS  # what a node's CPU count could be, whatever it declares


@dataclass(frozen=True)
class SiteLimits:
    """The sizes a site allows one job, whatever its nodes could hold (Slurm's
    ``MaxArraySize``, counted in tasks here: the count is what costs work)."""

    max_tasks_per_job: int = DEFAULT_MAX_TASKS_PER_JOB
    max_array_size: int = MAX_ARRAY_TASKS
    # The loop admits by queue quota (`SchedulerConfig.admission`): `railyard up` says so;
    # an API made without its loop's policy does not refuse by quota.
    queue_quotas: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.max_tasks_per_job <= MAX_JOB_GPUS:
            raise ValueError(f"max_tasks_per_job: 1 to {MAX_JOB_GPUS}")
        if not 1 <= self.max_array_size <= MAX_ARRAY_TASKS:
            raise ValueError(f"max_array_size: 1 to {MAX_ARRAY_TASKS}")


DEFAULT_LIMITS = SiteLimits()


def tasks_field(spec: JobSubmit) -> str:
    """The field a user set the job's task count with, for the line that refuses it."""
    for name in ("ntasks_per_node", "ntasks", "gpus_per_task"):
        if getattr(spec, name) is not None:
            return name
    return "gpus"


def node_room(node: Node, asks_gpus: bool) -> int:
    """Tasks ``node`` could ever run at once: one per CPU, as Slurm counts at least one CPU
    per task; a GPU job's also one per GPU (its tasks are one per GPU by default, and a test
    machine may declare more virtual GPUs than cores). 0: it declares no cores, no bound."""
    if not node.cpu_cores:
        return 0
    return max(node.cpu_cores, node.gpus) if asks_gpus else node.cpu_cores


def check_sizes(
    spec: JobSubmit,
    *,
    flavor: str,
    workers: int,
    tasks_per_worker: int,
    asks_gpus: bool,
    cpus_per_worker: int,
    nodes: Sequence[Node],
    limits: SiteLimits,
    array_tasks: int | None,
) -> None:
    """Raise :class:`Invalid` naming the first bound the job is past: its array's tasks, its
    tasks on one node, in all, or its CPUs on one node. ``nodes``: those of its flavor that
    the server knows (a chunk's tasks run on one node)."""
    if array_tasks is not None and array_tasks > limits.max_array_size:
        raise Invalid(
            "array",
            f"{array_tasks} tasks, over this site's limit of {limits.max_array_size} per array "
            "(railyard up --max-array-size)",
            f"split it into arrays of at most {limits.max_array_size}, or ask an admin",
        )
    field = tasks_field(spec)
    rooms = [node_room(n, asks_gpus) for n in nodes]
    if rooms and all(rooms) and tasks_per_worker > max(rooms):
        per = "CPU or GPU" if asks_gpus else "CPU"
        raise Invalid(
            field,
            f"{tasks_per_worker} tasks on one node, the largest {flavor} node runs at most "
            f"{max(rooms)} (a task per {per}: Slurm counts at least one CPU per task)",
            f"at most {max(rooms)} tasks per node; more nodes (--nodes) for more",
        )
    total = workers * tasks_per_worker
    if rooms and all(rooms) and total > sum(rooms):
        raise Invalid(
            field,
            f"{total} tasks, the {len(rooms)} {flavor} node(s) run at most {sum(rooms)} at once",
            f"ask for at most {sum(rooms)} tasks",
        )
    if total > limits.max_tasks_per_job:
        raise Invalid(
            field,
            f"{total} tasks in one job, over this site's limit of {limits.max_tasks_per_job} "
            "(railyard up --max-tasks-per-job)",
            "split the work into an array or several jobs, or ask an admin",
        )
    if cpus_per_worker > MAX_NODE_CPUS:
        raise Invalid(
            "cpus_per_task",
            f"{cpus_per_worker} CPUs on one node (--cpus-per-task times its tasks there) is "
            f"more than any node has ({MAX_NODE_CPUS})",
            "ask for fewer CPUs per task or fewer tasks per node",
        )
