"""What a job books and whether this cluster could ever hold it: its flavor (by name, GPU
type or its queue's node pool), its chunks, per-chunk CPUs and memory (``--exclusive``: whole
nodes), its sizes, the nodes it may use (``--nodelist``, ``--exclude``, ``--constraint``), and
whether the real topology, and its queue's quota, could ever fit it. Read from the nodes table
once per transaction (``once``).

Sizes: a job of 3,000 tasks on one node was accepted (up to 1,048,576 were) and cost the loop
~0.15 s per rank while another user's job waited 452 s (issue 52); 1,638 jobs no node could
hold waited "Unschedulable" without naming why (issue 60). :func:`check_sizes` refuses at
submit, with one line naming the bound, a job whose tasks on one node, tasks in all, CPUs on
one node or array tasks exceed what the largest node of its flavor, all of them together, or
the site (:class:`~railyard.control.usecases.sizebounds.SiteLimits`) could ever hold.

The cluster is the nodes the server knows now, in every state (a drained or down node may
come back): on Ray, nodes join later, and until one of a flavor has joined only the site's
limits bound a job of it. When the cluster shrinks (a node leaves the nodes table), jobs
already admitted keep their size: the loop's feasibility check (``sched.feasible``) marks one
no node left could hold ``Unschedulable``, and it waits with that reason, never started and
never dropped, until such nodes come back or it is cancelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.blueprint.pools import gpu_of, pool_of
from railyard.client.bounds import MAX_JOB_GPUS
from railyard.control.errors import Invalid
from railyard.control.jobspec import Shape
from railyard.control.store.bulk import once
from railyard.control.store.convert import to_node, to_queue
from railyard.control.store.tables import NodeRow, QueueRow
from railyard.control.submission import JobSubmit
from railyard.control.usecases.sizebounds import SiteLimits
from railyard.sched.feasible import never_placeable, over_every_node
from railyard.sched.model import Job, Node
from railyard.sched.policies import PLACEMENT
from railyard.sched.quota import QuotaTree

MIB_PER_GB = 1024


@dataclass(frozen=True)
class Resources:
    """What the scheduler books for a job: its flavor, chunks, and per-chunk CPUs and memory."""

    flavor: str
    workers: int
    gpus_per_worker: int
    distinct_nodes: bool
    ntasks_per_node: int | None
    tasks_per_worker: int  # a chunk's tasks, on its one node
    cpus_per_worker: int
    mem_per_worker_gb: float
    mem_per_node_mb: int  # what a node's tasks may use together (the cgroup's limit)


def resources(spec: JobSubmit, shape: Shape, flavor: str) -> Resources:
    """Per-chunk CPUs and memory from Slurm's per-task CPUs and per-node memory.

    Tasks: a command job runs one per GPU unless told (like srun); a batch script's srun runs
    one per node unless told (sbatch's default without ``--ntasks``), so Slurm scripts that
    call ``srun torchrun`` start one torchrun per node, as under Slurm.

    A chunk that is a whole node (``--nodes``, or a job on one node) books ``--mem`` and
    ``--cpus-per-task`` times its tasks. One-GPU chunks the scheduler may spread (``--gpus N``)
    run one task each, so each books ``--cpus-per-task`` and an even share of ``--mem``.
    ``--mem-per-cpu`` (a task has one CPU unless ``--cpus-per-task`` says more) and
    ``--mem-per-gpu`` book that much per CPU or GPU of the chunk, as ``--mem`` would.

    A job that asks no GPUs books at least one CPU per task, as Slurm counts one: booked as 0,
    350 such jobs started at once on a 2-core node (issue 52). A GPU job's tasks are bounded
    by its GPUs (one per GPU unless told) and by ``sizebounds``; it books what it asks.
    """
    if spec.script is not None and shape.ntasks_per_node is None and not spec.gpus_per_task:
        shape = shape._replace(ntasks_per_node=1)  # --gpus-per-task: a task per chunk
    one_node_per_chunk = shape.distinct_nodes or shape.workers == 1
    if shape.ntasks_per_node and one_node_per_chunk:
        tasks = shape.ntasks_per_node
    elif spec.gpus_per_task:
        tasks = 1  # a chunk per task: --gpus-per-task without --nodes
    else:
        tasks = shape.gpus_per_worker or shape.ntasks_per_node or 1
    chunks = 1 if one_node_per_chunk else shape.workers  # what --mem is shared by
    mem_mb = spec.mem or 0
    if spec.mem_per_cpu is not None:
        mem_mb = spec.mem_per_cpu * (spec.cpus_per_task or 1) * tasks * chunks
    elif spec.mem_per_gpu is not None:
        mem_mb = spec.mem_per_gpu * shape.gpus_per_worker * chunks
    return Resources(
        flavor=flavor,
        workers=shape.workers,
        gpus_per_worker=shape.gpus_per_worker,
        distinct_nodes=shape.distinct_nodes,
        ntasks_per_node=shape.ntasks_per_node,
        tasks_per_worker=tasks,
        cpus_per_worker=(spec.cpus_per_task or (0 if shape.gpus_per_worker else 1)) * tasks,
        mem_per_worker_gb=mem_mb / MIB_PER_GB / chunks,
        mem_per_node_mb=mem_mb,
    )


def _node_choice(session: Session, spec: JobSubmit) -> dict[str, Any]:
    """``--nodelist`` / ``--exclude`` / ``--constraint`` as the scheduler's node sets. A name
    that is no node of this cluster is refused, as sbatch refuses one ("Invalid node name
    specified"), and so is a constraint no node meets ("Invalid feature specification")."""
    if spec.nodelist is None and spec.exclude is None and spec.constraint is None:
        return {}
    nodes: dict[str, tuple[str, frozenset[str]]] = once(session, "node-features", lambda: {
        name: (flavor, frozenset(features or ()))
        for name, flavor, features in session.execute(
            select(NodeRow.name, NodeRow.flavor, NodeRow.features)
        )
    })  # fmt: skip
    out: dict[str, Any] = {}
    for field, names, key in (("nodelist", spec.nodelist, "only_nodes"),
                              ("exclude", spec.exclude, "never_nodes")):  # fmt: skip
        if names is None:
            continue
        unknown = [name for name in names if name not in nodes]
        if unknown:
            shown = ", ".join(sorted(nodes)[:4]) + (", ..." if len(nodes) > 4 else "")
            raise Invalid(field, f"no node {unknown[0]!r}", f"nodes: {shown or 'none'}")
        out[key] = frozenset(names)
    if spec.constraint is not None:
        wanted = spec.constraint.any_of
        having = frozenset(
            name for name, (flavor, features) in nodes.items()
            if any(all(_has(f, flavor, features) for f in alt) for alt in wanted)
        )  # fmt: skip
        if not having:
            every = sorted({f for _, features in nodes.values() for f in features})
            raise Invalid("constraint", f"no node has features {spec.constraint.text!r}",
                          f"features here: {', '.join(every[:8]) or 'none'}, or a GPU "
                          "type (h100); a blueprint's node_groups declare features")  # fmt: skip
        only = out.get("only_nodes")
        out["only_nodes"] = having if only is None else only & having
        if not out["only_nodes"]:
            raise Invalid("constraint", "no node of --nodelist has those features")
    return out


def _has(feature: str, flavor: str, features: frozenset[str]) -> bool:
    """A node's feature: one its blueprint declares, or its GPU type (``h100`` on an
    ``H100-SXM-80GB`` node, as ``--gres=gpu:h100:N`` matches it)."""
    if feature in features:
        return True
    want, gpu = feature.lower(), gpu_of(flavor).lower()
    return want == gpu or gpu.startswith(want + "-") or want in gpu.split("-")


def _check_shape(
    session: Session, spec: JobSubmit, known: set[str] | None, pool: str | None = None
) -> Resources:
    """The job's flavor, chunks and tasks, checked against the nodes table: only the flavors
    of its queue's node pool (unpooled ones for a queue without a pool, `blueprint.pools`)."""
    shape = spec.shape()
    every = [(n.name, n.flavor, n.gpus) for n in cluster_nodes(session)]
    nodes = [n for n in every if pool_of(n[1]) == pool]
    everywhere = set(known) if known is not None else {f for _, f, _ in every}
    flavors = {f for f in everywhere if pool_of(f) == pool}
    flavor = spec.flavor
    if flavor is not None and flavor in everywhere and flavor not in flavors:
        where = f"pool {pool!r}" if pool else "no pool"
        raise Invalid(
            "flavor",
            f"flavor {flavor!r} is not for queue {spec.queue!r}, which runs on {where}",
            f"its flavors: {sorted(flavors) or 'none'}; or submit to a queue of that pool",
        )
    if spec.gpu_type is not None:
        by_type = match_gpu_type(spec.gpu_type, flavors)
        if flavor is not None and flavor != by_type:
            raise Invalid("flavor", f"flavor {flavor!r} is not GPU type {spec.gpu_type!r}")
        flavor = by_type
    if flavor is None:
        cpu_nodes = sorted(n for n in nodes if n[2] == 0)
        if shape.gpus_per_worker == 0 and cpu_nodes:
            flavor = cpu_nodes[0][1]  # a CPU job goes to CPU nodes where there are some
        elif nodes:
            flavor = min(nodes)[1]
        elif len(flavors) == 1:
            flavor = next(iter(flavors))
        else:
            raise Invalid("flavor", "no nodes are registered", "name a flavor, or add nodes")
    if flavor not in flavors:
        raise Invalid(
            "flavor", f"no node has flavor {flavor!r}", f"known flavors: {sorted(flavors)}"
        )
    sizes = [g for _, f, g in nodes if f == flavor]
    per_worker, workers = shape.gpus_per_worker, shape.workers
    if sizes and per_worker > max(sizes):
        raise Invalid(
            "gpus_per_worker",
            f"{per_worker} GPUs per worker, but the largest {flavor} node has {max(sizes)}",
            f"use more workers with at most {max(sizes)} GPUs each",
        )
    fitting = [g for g in sizes if g >= per_worker]
    if shape.distinct_nodes and nodes and workers > len(fitting):
        raise Invalid(
            "nodes",
            f"{workers} nodes asked, the cluster has {len(fitting)} {flavor} node(s) with "
            f"at least {per_worker} GPUs",
            f"ask for at most {len(fitting)} nodes, or fewer GPUs per node",
        )
    if sizes and workers * per_worker > sum(sizes):
        raise Invalid(
            "gpus",
            f"{workers * per_worker} GPUs asked, the cluster has {sum(sizes)} {flavor}",
            f"ask for at most {sum(sizes)}",
        )
    if spec.exclusive and sizes:
        return _whole_nodes(session, spec, shape, flavor, max(sizes))
    return resources(spec, shape, flavor)


def _whole_nodes(
    session: Session, spec: JobSubmit, shape: Shape, flavor: str, node_gpus: int
) -> Resources:
    """``--exclusive``: whole nodes, as Slurm 22.05 gives them: every GPU, core and byte of
    memory of each node it gets (its tasks stay as many as it asked for: one per GPU asked,
    else one). A gang of one-GPU chunks spread over nodes is refused: say how many nodes."""
    if not shape.distinct_nodes and shape.workers * shape.gpus_per_worker > node_gpus:
        raise Invalid(
            "exclusive",
            f"--exclusive with {shape.workers * shape.gpus_per_worker} GPUs spread over "
            f"{flavor} nodes of {node_gpus}",
            "say how many whole nodes: --nodes N --exclusive",
        )
    asked = shape.gpus_per_worker if shape.distinct_nodes else shape.gpus_per_worker * shape.workers
    whole = Shape(
        workers=shape.workers if shape.distinct_nodes else 1,
        gpus_per_worker=node_gpus,
        distinct_nodes=True,
        ntasks_per_node=shape.ntasks_per_node or (None if spec.script else max(1, asked)),
    )
    res = resources(spec, whole, flavor)
    mine = [n for n in cluster_nodes(session) if n.flavor == flavor]
    cores = max((n.cpu_cores for n in mine), default=0)
    mem_gb = max((n.mem_gb for n in mine), default=0.0)
    return replace(
        res,
        cpus_per_worker=max(res.cpus_per_worker, cores),
        mem_per_worker_gb=max(res.mem_per_worker_gb, mem_gb),
    )


_RESOURCE_FIELDS = {"--cpus-per-task": "cpus_per_task", "--mem": "mem"}


def cluster_nodes(session: Session) -> list[Node]:
    """The nodes, read once per transaction (the shape check and the placement check)."""
    return once(session, "nodes", lambda: [to_node(r) for r in session.scalars(select(NodeRow))])


def _idle_quota(session: Session) -> QuotaTree:
    """Every queue's quota with no job running, read once per transaction (``once``)."""
    return once(session, "idle-quota", lambda: QuotaTree(
        [to_queue(r) for r in session.scalars(select(QueueRow))],
        {n.flavor for n in cluster_nodes(session)},
    ))  # fmt: skip


def _check_feasible(session: Session, job: Job) -> None:
    """The gang must fit the real topology (all nodes up and idle), not just the counts; each
    worker's cores and memory must fit the largest node of its flavor that declares them.
    Judged once per shape in a transaction (a batch of 1,000 alike jobs: once)."""
    problem = once(session, f"feasible:{job!r}", lambda: _infeasible(session, job))
    if problem is not None:
        raise Invalid(*problem)


def _infeasible(session: Session, job: Job) -> tuple[str, str, str] | None:
    nodes = cluster_nodes(session)
    too_big = over_every_node([n for n in nodes if n.flavor == job.flavor], job)
    if too_big is not None:
        option, line = too_big
        hint = "ask for less; a worker's share counts every task it runs on its node"
        return _RESOURCE_FIELDS[option], line, hint
    why = never_placeable(nodes, job, PLACEMENT.get("fabric-aware")) if nodes else None
    if why is not None:
        return "gpus", why, "fewer workers, smaller workers, or a looser --topology"
    return None


MAX_NODE_CPUS = MAX_JOB_GPUS  # what a node's CPU count could be, whatever it declares


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


def _check_quota(tree: QuotaTree, queue: str, flavor: str, gpus: int) -> None:
    """Refuse a job its queue could never admit, even with the whole cluster idle: more GPUs
    than its quota and all it may borrow (``tree`` holds no job). The loop would mark it
    ``Unschedulable`` forever (``sched.feasible``: 1,638 such jobs waited, issue 60)."""
    if gpus and queue in tree.queues and not tree.fits(queue, flavor, gpus):
        most = tree.available(queue, flavor)
        raise Invalid(
            "gpus",
            f"{gpus} {flavor} GPUs, queue {queue} may never use more than {most} (its quota "
            "and what it may borrow)",
            f"ask for at most {most}, or submit to a queue with more (railyard queues)",
        )


def _placement(session: Session, spec: JobSubmit, res: Resources, *, queue_quotas: bool) -> Job:
    """The job as the scheduler will see it (its node sets from ``--nodelist``, ``--exclude``
    and ``--constraint``), once the real topology, and with ``queue_quotas`` its queue's
    quota with the cluster idle, could ever hold it."""
    job = Job(
        id="new",
        queue=spec.queue,
        flavor=res.flavor,
        workers=res.workers,
        gpus_per_worker=res.gpus_per_worker,
        cpus_per_worker=res.cpus_per_worker,
        mem_per_worker_gb=res.mem_per_worker_gb,
        distinct_nodes=res.distinct_nodes,
        topology=spec.topology.requirement if spec.topology else None,
        **_node_choice(session, spec),
    )
    _check_feasible(session, job)
    if queue_quotas:
        _check_quota(_idle_quota(session), spec.queue, res.flavor, job.gpus)
    return job


def match_gpu_type(gpu_type: str, flavors: set[str]) -> str:
    """The flavor a Slurm GPU type names: ``h100`` matches ``H100-SXM-80GB`` (case apart, the
    type is the flavor, its start before a ``-``, or one of its ``-`` parts). An unknown type
    is an error naming the known flavors; one matching several asks for a longer type."""
    want = gpu_type.strip().lower()
    found = sorted(
        f
        for f in flavors
        if f.lower() == want or f.lower().startswith(want + "-") or want in f.lower().split("-")
    )
    known = ", ".join(sorted(flavors)) or "none"
    if not found:
        raise Invalid("gpu_type", f"no node has GPU type {gpu_type!r}", f"known: {known}")
    if len(found) > 1:
        raise Invalid(
            "gpu_type",
            f"GPU type {gpu_type!r} matches {', '.join(found)}",
            "give a longer type, or --flavor",
        )
    return found[0]


@dataclass(frozen=True)
class Booking:
    """What a job books (per chunk) and the job as the scheduler will place it."""

    resources: Resources
    job: Job


def book(
    session: Session,
    spec: JobSubmit,
    *,
    pool: str | None,
    known_flavors: set[str] | None,
    limits: SiteLimits,
) -> Booking:
    """``spec`` on this cluster's nodes of its queue's ``pool``: Invalid names the first
    thing no node, no count of them, or the site's limits (``sizebounds``) could ever hold."""
    res = _check_shape(session, spec, known_flavors, pool)
    check_sizes(
        spec,
        flavor=res.flavor,
        workers=res.workers,
        tasks_per_worker=res.tasks_per_worker,
        asks_gpus=res.gpus_per_worker > 0,
        cpus_per_worker=res.cpus_per_worker,
        nodes=[n for n in cluster_nodes(session) if n.flavor == res.flavor],
        limits=limits,
        array_tasks=len(spec.array.indices) if spec.array is not None else None,
    )
    return Booking(res, _placement(session, spec, res, queue_quotas=limits.queue_quotas))
