"""Admission: every check a job must pass before it is stored, and the column values its
rows share. ``jobs.submit`` and ``jobs.submit_many`` store what :func:`admit` returns; a
batch admits each job first and stores them all in one statement per table.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from railyard.blueprint.pools import gpu_of, pool_of
from railyard.client.bounds import MAX_SUBMIT_STORED_BYTES
from railyard.client.values import (
    parse_array,
    parse_constraint,
    parse_hostlist,
    parse_mem,
    parse_signal,
    parse_topology,
)
from railyard.control.errors import Forbidden, Invalid
from railyard.control.jobspec import Shape, match_gpu_type
from railyard.control.schemas import JobSubmit
from railyard.control.store.bulk import once, queue_settings
from railyard.control.store.convert import to_node, to_queue
from railyard.control.store.paths import default_output
from railyard.control.store.tables import HOLD_REASONS, JobRow, JobState, NodeRow, QueueRow, User
from railyard.control.usecases.accounts import RunAs
from railyard.control.usecases.apps import app_env
from railyard.control.usecases.containers import admit_container
from railyard.control.usecases.priority import job_priority
from railyard.control.usecases.queues import member_queues, parent_map, path
from railyard.control.usecases.sizebounds import (
    DEFAULT_LIMITS,
    SiteLimits,
    check_quota,
    check_sizes,
)
from railyard.sched.dependencies import job_ids, parse_dependency
from railyard.sched.feasible import never_placeable, over_every_node
from railyard.sched.limits import min_runtime_bound_s
from railyard.sched.model import Job, Level, Node, TopologyMode, TopologyRequirement
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
    mem_mb = spec.mem_mb()
    if spec.mem_per_cpu is not None:
        mem_mb = parse_mem(spec.mem_per_cpu) * (spec.cpus_per_task or 1) * tasks * chunks
    elif spec.mem_per_gpu is not None:
        mem_mb = parse_mem(spec.mem_per_gpu) * shape.gpus_per_worker * chunks
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


def _check_queue(session: Session, user: User, queue: str) -> None:
    """The queue exists, is a leaf, and the user may submit to it. Hints name only the queues
    the user may see (their own and those below), never the rest of the tree."""
    parents = once(session, "queues", lambda: parent_map(session))
    mine = (
        set()
        if user.is_admin
        else once(session, f"mine:{user.id}", lambda: member_queues(session, user))
    )

    def visible() -> list[str]:
        return sorted(q for q in parents if user.is_admin or mine.intersection(path(parents, q)))

    if queue not in parents:
        known = ", ".join(visible()) or "none you may use (an admin adds you to one)"
        raise Invalid("queue", f"unknown queue {queue!r}", f"known queues: {known}")
    if not user.is_admin and not mine.intersection(path(parents, queue)):
        raise Forbidden(f"user {user.name!r} may not submit to queue {queue!r}")
    if queue in {p for p in parents.values() if p is not None}:
        leaves = [n for n in visible() if n not in parents.values()]
        raise Invalid("queue", f"queue {queue!r} has sub-queues", f"submit to one of {leaves}")


def default_partition(session: Session, queue: str) -> str:
    """Where a job for ``queue`` goes: down to the sub-queue marked default while there is
    one (Slurm's Default=YES): a job that names no partition asks for `default`, the parent of
    the partitions a blueprint or `up --partition` declares (`usecases.partitions`)."""

    def load() -> dict[str, str]:
        marked = select(QueueRow.parent, QueueRow.name).where(QueueRow.is_default)
        return {parent: name for parent, name in session.execute(marked) if parent is not None}

    chosen: dict[str, str] = once(session, "default-subs", load)
    seen = {queue}
    while (child := chosen.get(queue)) is not None and child not in seen:
        queue = child
        seen.add(queue)
    return queue


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
    for field, text, key in (("nodelist", spec.nodelist, "only_nodes"),
                             ("exclude", spec.exclude, "never_nodes")):  # fmt: skip
        if text is None:
            continue
        names = parse_hostlist(text)
        unknown = [name for name in names if name not in nodes]
        if unknown:
            shown = ", ".join(sorted(nodes)[:4]) + (", ..." if len(nodes) > 4 else "")
            raise Invalid(field, f"no node {unknown[0]!r}", f"nodes: {shown or 'none'}")
        out[key] = frozenset(names)
    if spec.constraint is not None:
        wanted = parse_constraint(spec.constraint)
        having = frozenset(
            name for name, (flavor, features) in nodes.items()
            if any(all(_has(f, flavor, features) for f in alt) for alt in wanted)
        )  # fmt: skip
        if not having:
            every = sorted({f for _, features in nodes.values() for f in features})
            raise Invalid("constraint", f"no node has features {spec.constraint!r}",
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


def _check_workdir(workdir: str) -> None:
    """A job must be able to start where it asks to: an existing absolute directory."""
    if not workdir:
        return
    if not os.path.isabs(workdir):
        raise Invalid("workdir", f"{workdir!r} is not an absolute path", "give the full path")
    if not os.path.isdir(workdir):
        raise Invalid("workdir", f"no directory {workdir!r} on the node", "create it first")


def _check_stored(spec: JobSubmit, tasks: int) -> None:
    stored = spec.stored_bytes() * tasks
    if stored > MAX_SUBMIT_STORED_BYTES:
        raise Invalid(
            "script" if spec.script else "command",
            f"{tasks} tasks x {spec.stored_bytes()} bytes of command, env and script is over "
            f"{MAX_SUBMIT_STORED_BYTES} bytes",
            "put large inputs in a file the job reads, or submit fewer tasks",
        )


def queue_pool(session: Session, queue: str) -> str | None:
    """The node pool a queue's jobs run on: its own, else its nearest ancestor's."""
    parents = once(session, "queues", lambda: parent_map(session))
    pools = once(
        session, "pools", lambda: dict(session.execute(select(QueueRow.name, QueueRow.pool)).all())
    )
    for name in reversed(path(parents, queue)):
        if pools.get(name):
            return str(pools[name])
    return None


def _check_shape(
    session: Session, spec: JobSubmit, known: set[str] | None, pool: str | None = None
) -> Resources:
    """The job's flavor, chunks and tasks, checked against the nodes table: only the flavors
    of its queue's node pool (unpooled ones for a queue without a pool, `blueprint.pools`)."""
    shape = spec.shape()
    every = [(n.name, n.flavor, n.gpus) for n in _nodes(session)]
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
    mine = [n for n in _nodes(session) if n.flavor == flavor]
    cores = max((n.cpu_cores for n in mine), default=0)
    mem_gb = max((n.mem_gb for n in mine), default=0.0)
    return replace(
        res,
        cpus_per_worker=max(res.cpus_per_worker, cores),
        mem_per_worker_gb=max(res.mem_per_worker_gb, mem_gb),
    )


_RESOURCE_FIELDS = {"--cpus-per-task": "cpus_per_task", "--mem": "mem"}


def _nodes(session: Session) -> list[Node]:
    """The nodes, read once per transaction (the shape check and the placement check)."""
    return once(session, "nodes", lambda: [to_node(r) for r in session.scalars(select(NodeRow))])


def _idle_quota(session: Session) -> QuotaTree:
    """Every queue's quota with no job running, read once per transaction (``once``)."""
    return once(session, "idle-quota", lambda: QuotaTree(
        [to_queue(r) for r in session.scalars(select(QueueRow))],
        {n.flavor for n in _nodes(session)},
    ))  # fmt: skip


def _check_feasible(session: Session, job: Job) -> None:
    """The gang must fit the real topology (all nodes up and idle), not just the counts; each
    worker's cores and memory must fit the largest node of its flavor that declares them.
    Judged once per shape in a transaction (a batch of 1,000 alike jobs: once)."""
    problem = once(session, f"feasible:{job!r}", lambda: _infeasible(session, job))
    if problem is not None:
        raise Invalid(*problem)


def _infeasible(session: Session, job: Job) -> tuple[str, str, str] | None:
    nodes = _nodes(session)
    too_big = over_every_node([n for n in nodes if n.flavor == job.flavor], job)
    if too_big is not None:
        option, line = too_big
        hint = "ask for less; a worker's share counts every task it runs on its node"
        return _RESOURCE_FIELDS[option], line, hint
    why = never_placeable(nodes, job, PLACEMENT.get("fabric-aware")) if nodes else None
    if why is not None:
        return "gpus", why, "fewer workers, smaller workers, or a looser --topology"
    return None


def check_dependency(session: Session, actor: User, dependency: str | None) -> None:
    """Every job a dependency names must exist (a job id, or an array's number), as sbatch
    refuses with "Job dependency problem": a typo would otherwise wait forever. Another
    user's job is "no job" too (admins excepted), as for `show`: whether it exists and when
    it ends is not this user's to learn."""
    if dependency is None:
        return
    wanted = job_ids(parse_dependency(dependency)[0])
    if not wanted:
        return
    stmt = select(JobRow.id, JobRow.array_parent).where(
        or_(JobRow.id.in_(wanted), JobRow.array_parent.in_(wanted))
    )
    if not actor.is_admin:
        stmt = stmt.where(JobRow.user_id == actor.id)
    found = session.execute(stmt)
    missing = wanted - {i for row in found for i in row if i is not None}
    if missing:
        raise Invalid(
            "dependency",
            f"no job {', '.join(sorted(missing, key=lambda i: (len(i), i)))}",
            "name jobs that were submitted (railyard queue --all, railyard history)",
        )


def _check_bounds(session: Session, queue: str, min_runtime_s: float, grace_s: float) -> None:
    """What a job may claim for itself is bounded by its queue (an admin's setting, or for
    the protection from preemption the default bound)."""
    # Kept in the transaction's memo: the session's identity map holds rows weakly, so a
    # batch would read the queue again per job (here and in ``job_priority``).
    row = queue_settings(session, queue)
    if row is None:
        return
    for field, value, bound in (
        ("min_runtime_s", min_runtime_s, min_runtime_bound_s(row.max_min_runtime_s)),
        ("checkpoint_grace_s", grace_s, row.max_checkpoint_grace_s),
    ):
        if bound is not None and value > bound:
            raise Invalid(
                field,
                f"{value:g} s is above queue {queue}'s bound of {bound:g} s",
                f"ask for at most {bound:g}",
            )


def _check_deadline(session: Session, spec: JobSubmit) -> None:
    """A deadline is judged against the job's time limit (`sched.limits.latest_start_t_s`):
    without one, no start could be sure to end in time (sbatch asks for a limit too)."""
    if spec.walltime_s() is not None:
        return
    row = queue_settings(session, spec.queue)
    if row is None or (row.default_time_s is None and row.max_time_s is None):
        raise Invalid(
            "deadline_t_s",
            f"a deadline needs a time limit, and queue {spec.queue} gives none",
            "add --time",
        )


@dataclass(frozen=True)
class Admitted:
    """A job that passed every check: the values its rows share (all but number and ids) and
    its array indices (None for one job)."""

    common: dict[str, Any]
    indices: list[int] | None
    spec: JobSubmit

    @property
    def count(self) -> int:
        return len(self.indices) if self.indices is not None else 1


def admit(
    session: Session,
    user: User,
    spec: JobSubmit,
    now_t_s: float,
    *,
    known_flavors: set[str] | None = None,
    run_as: RunAs | None = None,
    limits: SiteLimits = DEFAULT_LIMITS,
) -> Admitted:
    """Check ``spec`` for ``user`` (raises Invalid, Forbidden) and compute its stored columns.

    ``run_as`` None skips the Unix-account check (an embedded API with no executor);
    ``limits`` are the site's bounds on a job's size (``sizebounds``)."""
    if "," in spec.queue:
        return _first_partition(session, user, spec, now_t_s, known_flavors, run_as, limits)
    queue = default_partition(session, spec.queue)
    if queue != spec.queue:
        spec = spec.model_copy(update={"queue": queue})
    _check_queue(session, user, spec.queue)
    res = _check_shape(session, spec, known_flavors, queue_pool(session, spec.queue))
    if run_as is not None:
        run_as.check(user.name, user.unix_user, is_admin=user.is_admin)
    _check_workdir(spec.workdir)
    level, mode = parse_topology(spec.topology) if spec.topology else (None, None)
    signal_name, grace_s = parse_signal(spec.signal) if spec.signal else ("SIGUSR1", 30.0)
    if spec.checkpoint_grace_s is not None:
        grace_s = spec.checkpoint_grace_s
    indices, max_running = parse_array(spec.array) if spec.array else (None, None)
    check_sizes(
        spec,
        flavor=res.flavor,
        workers=res.workers,
        tasks_per_worker=res.tasks_per_worker,
        asks_gpus=res.gpus_per_worker > 0,
        cpus_per_worker=res.cpus_per_worker,
        nodes=[n for n in _nodes(session) if n.flavor == res.flavor],
        limits=limits,
        array_tasks=len(indices) if indices is not None else None,
    )
    if spec.terminal and indices is not None:
        raise Invalid("terminal", "an interactive job (or an app) is one job, not an array",
                      "railyard run [options] -- CMD")  # fmt: skip
    _check_bounds(session, spec.queue, spec.min_runtime_s, grace_s)
    if spec.deadline_t_s is not None:
        _check_deadline(session, spec)
    priority = job_priority(session, user, spec)
    topology = (
        TopologyRequirement(Level.parse(level), TopologyMode(mode)) if level and mode else None
    )
    shape = Job(
        id="new",
        queue=spec.queue,
        flavor=res.flavor,
        workers=res.workers,
        gpus_per_worker=res.gpus_per_worker,
        cpus_per_worker=res.cpus_per_worker,
        mem_per_worker_gb=res.mem_per_worker_gb,
        distinct_nodes=res.distinct_nodes,
        topology=topology,
        **_node_choice(session, spec),
    )
    _check_feasible(session, shape)
    if limits.queue_quotas:
        check_quota(_idle_quota(session), spec.queue, res.flavor, shape.gpus)
    check_dependency(session, user, spec.dependency)
    _check_stored(spec, len(indices) if indices is not None else 1)
    output = spec.output
    if output is None and spec.script is not None:
        output = default_output(indices is not None)
    common = {
        "user_id": user.id,
        "unix_user": user.unix_user,
        "queue": spec.queue,
        "name": spec.name,
        "state": JobState.PENDING.value,
        "hold": "user" if spec.hold else None,
        "reason": HOLD_REASONS["user"] if spec.hold else "",
        "script": spec.script,
        "workdir": spec.workdir,
        "submit_dir": spec.submit_dir or spec.workdir,
        "submit_host": spec.submit_host,
        "export": spec.export,
        "env": dict(spec.env) | (app_env() if spec.terminal == "app" else {}),
        "flavor": res.flavor,
        "workers": res.workers,
        "gpus_per_worker": res.gpus_per_worker,
        "distinct_nodes": res.distinct_nodes,
        "ntasks_per_node": res.ntasks_per_node,
        "cpus_per_task": spec.cpus_per_task or 0,
        "mem_per_node_mb": res.mem_per_node_mb,
        "gpus_per_task": spec.gpus_per_task,
        "mem_per_cpu_mb": parse_mem(spec.mem_per_cpu) if spec.mem_per_cpu is not None else None,
        "mem_per_gpu_mb": parse_mem(spec.mem_per_gpu) if spec.mem_per_gpu is not None else None,
        "cpus_per_worker": res.cpus_per_worker,
        "mem_per_worker_gb": res.mem_per_worker_gb,
        "output": output,
        "error": spec.error,
        "open_mode": spec.open_mode,
        "dependency": spec.dependency,
        "priority": priority,
        "nice": spec.nice,
        "preemptible": spec.preemptible,
        "walltime_s": spec.walltime_s(),
        "topology_level": level,
        "topology_mode": mode,
        "min_runtime_s": spec.min_runtime_s,
        "checkpoint_grace_s": grace_s,
        "warn_before_s": parse_signal(spec.signal)[1] if spec.signal else None,
        "preempt_signal": signal_name,
        "signal_batch_shell": (spec.signal or "").strip().upper().startswith("B:"),
        "terminal": spec.terminal,
        "container": admit_container(
            session,
            spec,
            user.unix_user,
            run_as.container_registries if run_as is not None else (),
        ),
        "image": spec.container.image if spec.container is not None else None,
        "requeue": spec.requeue,
        "umask": spec.umask,
        "requeue_on_failure": False,  # Slurm's --requeue: node failure and preemption only
        "restart_count": 0,
        "array_max_running": max_running,
        "array_spec": spec.array if indices is not None else None,
        "submit_t_s": now_t_s,
        "updated_t_s": now_t_s,
        "begin_t_s": spec.begin_t_s,
        "deadline_t_s": spec.deadline_t_s,
        "tasks_given": spec.ntasks is not None or spec.ntasks_per_node is not None,
        "only_nodes": sorted(shape.only_nodes) if shape.only_nodes is not None else None,
        "never_nodes": sorted(shape.never_nodes) or None,
    }
    return Admitted(common, indices, spec)


def _first_partition(
    session: Session,
    user: User,
    spec: JobSubmit,
    now_t_s: float,
    known_flavors: set[str] | None,
    run_as: RunAs | None,
    limits: SiteLimits,
) -> Admitted:
    """sbatch ``-p gpu,debug``: the job goes to the first listed partition that admits it (one
    the user may use, whose nodes could ever hold it). Slurm takes the one that can start it
    earliest; the first that could ever run it is railyard's simpler, stable choice. When none
    admits it, the first one's refusal is the answer."""
    refusals: list[Invalid | Forbidden] = []
    for name in dict.fromkeys(spec.queue.split(",")):
        try:
            one = spec.model_copy(update={"queue": name})
            return admit(
                session, user, one, now_t_s, known_flavors=known_flavors, run_as=run_as,
                limits=limits,
            )  # fmt: skip
        except (Invalid, Forbidden) as exc:
            refusals.append(exc)
    raise refusals[0]


def admit_batch(
    session: Session,
    user: User,
    specs: Sequence[JobSubmit],
    now_t_s: float,
    *,
    known_flavors: set[str] | None = None,
    run_as: RunAs | None = None,
    limits: SiteLimits = DEFAULT_LIMITS,
) -> list[Admitted]:
    """:func:`admit` of each of a batch's jobs, all or nothing; a refusal names the element
    (``jobs[3].queue``). A spec equal to the one before it shares that one's admission: the
    same user, transaction and checks give the same answer, and its rows differ only in the
    numbers ``store_admitted`` gives them (1,000 alike jobs were 30 % of a batch's CPU)."""
    admitted: list[Admitted] = []
    for i, spec in enumerate(specs):
        if admitted and spec == specs[i - 1]:
            admitted.append(admitted[-1])  # immutable; no value of its own per job
            continue
        try:
            admitted.append(
                admit(
                    session,
                    user,
                    spec,
                    now_t_s,
                    known_flavors=known_flavors,
                    run_as=run_as,
                    limits=limits,
                )
            )
        except Invalid as exc:  # name the element, so the one line says which job
            raise Invalid(f"jobs[{i}].{exc.field}", exc.message, exc.hint) from None
    return admitted
