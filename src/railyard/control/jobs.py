"""Job use-cases: submit (with every check a job must pass before it is stored), list, show,
cancel, hold and release. Plain functions on a Session and the acting User; the API routes
call them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from railyard.client.bounds import JOB_ID_PATTERN, MAX_SUBMIT_STORED_BYTES
from railyard.client.values import parse_array, parse_signal, parse_topology
from railyard.control.accounts import RunAs
from railyard.control.bulk import (
    JobView,
    cancel_array,
    cancelled,
    insert_events,
    insert_jobs,
    node_sizes,
    once,
)
from railyard.control.convert import to_node
from railyard.control.effects import record, request_wake
from railyard.control.errors import Conflict, Forbidden, Invalid, NotFound
from railyard.control.jobspec import Shape, match_gpu_type
from railyard.control.paths import default_output, script_path
from railyard.control.priority import job_priority
from railyard.control.queues import member_queues, parent_map, path
from railyard.control.schemas import JobSubmit
from railyard.control.tables import (
    ACTIVE_STATES,
    HOLD_REASONS,
    Counter,
    JobRow,
    JobState,
    NodeRow,
    QueueRow,
    User,
)
from railyard.control.transitions import transition_many
from railyard.sched.dependencies import job_ids, parse_dependency
from railyard.sched.feasible import never_placeable, over_every_node
from railyard.sched.model import Job, Level, TopologyMode, TopologyRequirement
from railyard.sched.policies import PLACEMENT

JOB_COUNTER = "job"
MIB_PER_GB = 1024


@dataclass(frozen=True)
class Resources:
    """What the scheduler books for a job: its flavor, chunks, and per-chunk CPUs and memory."""

    flavor: str
    workers: int
    gpus_per_worker: int
    distinct_nodes: bool
    ntasks_per_node: int | None
    cpus_per_worker: int
    mem_per_worker_gb: float


def resources(spec: JobSubmit, shape: Shape, flavor: str) -> Resources:
    """Per-chunk CPUs and memory from Slurm's per-task CPUs and per-node memory.

    Tasks: a command job runs one per GPU unless told (like srun); a batch script's srun runs
    one per node unless told (sbatch's default without ``--ntasks``), so Slurm scripts that
    call ``srun torchrun`` start one torchrun per node, as under Slurm.

    A chunk that is a whole node (``--nodes``, or a job on one node) books ``--mem`` and
    ``--cpus-per-task`` times its tasks. One-GPU chunks the scheduler may spread (``--gpus N``)
    run one task each, so each books ``--cpus-per-task`` and an even share of ``--mem``.
    """
    if spec.script is not None and shape.ntasks_per_node is None:
        shape = shape._replace(ntasks_per_node=1)
    one_node_per_chunk = shape.distinct_nodes or shape.workers == 1
    if shape.ntasks_per_node and one_node_per_chunk:
        tasks = shape.ntasks_per_node
    else:
        tasks = shape.gpus_per_worker or shape.ntasks_per_node or 1
    mem_gb = spec.mem_mb() / MIB_PER_GB
    return Resources(
        flavor=flavor,
        workers=shape.workers,
        gpus_per_worker=shape.gpus_per_worker,
        distinct_nodes=shape.distinct_nodes,
        ntasks_per_node=shape.ntasks_per_node,
        cpus_per_worker=(spec.cpus_per_task or 0) * tasks,
        mem_per_worker_gb=mem_gb if one_node_per_chunk else mem_gb / shape.workers,
    )


_JOB_ID = re.compile(JOB_ID_PATTERN)


def _next_number(session: Session, count: int = 1) -> int:
    """Reserve ``count`` job numbers atomically in this transaction; return the first.

    ``UPDATE ... RETURNING`` holds the row lock until commit (PostgreSQL) or takes the
    database write lock (SQLite), so two submitters never get the same number.
    """
    bump = (
        update(Counter)
        .where(Counter.name == JOB_COUNTER)
        .values(value=Counter.value + count)
        .returning(Counter.value)
        .execution_options(synchronize_session=False)
    )
    value = session.execute(bump).scalar_one_or_none()
    if value is None:
        try:
            with session.begin_nested():
                session.add(Counter(name=JOB_COUNTER, value=count))
            return 1
        except IntegrityError:  # someone created it first
            value = session.execute(bump).scalar_one()
    return value - count + 1


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


def _check_shape(session: Session, spec: JobSubmit, known: set[str] | None) -> Resources:
    """The job's flavor, chunks and tasks, checked against the nodes table."""
    shape = spec.shape()
    nodes = once(session, "node_sizes", lambda: node_sizes(session))
    flavors = set(known) if known is not None else {f for _, f, _ in nodes}
    flavor = spec.flavor
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
    if spec.exclusive and sizes and per_worker < max(sizes):
        raise Invalid(
            "exclusive",
            f"--exclusive asks for whole nodes, but the job takes {per_worker} of "
            f"{max(sizes)} GPUs per node",
            f"ask for --gpus-per-node {max(sizes)}, or drop --exclusive",
        )
    return resources(spec, shape, flavor)


def _task_numbers(number: int, count: int) -> list[int]:
    """Each array task its own numeric id, as Slurm: the array's number goes to the last task,
    the others take the numbers reserved after it (``3_0..3_3`` -> 4, 5, 6, 3)."""
    return [number + i + 1 for i in range(count - 1)] + [number]


_RESOURCE_FIELDS = {"--cpus-per-task": "cpus_per_task", "--mem": "mem"}


def _check_feasible(session: Session, job: Job) -> None:
    """The gang must fit the real topology (all nodes up and idle), not just the counts; each
    worker's cores and memory must fit the largest node of its flavor that declares them."""
    nodes = once(session, "nodes", lambda: [to_node(r) for r in session.scalars(select(NodeRow))])
    too_big = over_every_node([n for n in nodes if n.flavor == job.flavor], job)
    if too_big is not None:
        option, line = too_big
        hint = "ask for less; a worker's share counts every task it runs on its node"
        raise Invalid(_RESOURCE_FIELDS[option], line, hint)
    why = never_placeable(nodes, job, PLACEMENT.get("fabric-aware")) if nodes else None
    if why is not None:
        hint = "fewer workers, smaller workers, or a looser --topology"
        raise Invalid("gpus", why, hint)


def _check_dependency(session: Session, actor: User, dependency: str | None) -> None:
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
    """What a job may claim for itself is bounded by its queue (an admin's setting)."""
    row = session.get(QueueRow, queue)
    if row is None:
        return
    for field, value, bound in (
        ("min_runtime_s", min_runtime_s, row.max_min_runtime_s),
        ("checkpoint_grace_s", grace_s, row.max_checkpoint_grace_s),
    ):
        if bound is not None and value > bound:
            raise Invalid(
                field,
                f"{value:g} s is above queue {queue}'s bound of {bound:g} s",
                f"ask for at most {bound:g}",
            )


def submit(
    session: Session,
    user: User,
    spec: JobSubmit,
    now_t_s: float,
    *,
    spool_dir: Path,
    known_flavors: set[str] | None = None,
    run_as: RunAs | None = None,
) -> list[JobView]:
    """Validate and store one job, or one row per array task (ids ``<n>_<i>``), in one
    multi-row ``INSERT`` (:mod:`railyard.control.bulk`); returns the stored rows' views.

    ``run_as`` None skips the Unix-account check (an embedded API with no executor)."""
    _check_queue(session, user, spec.queue)
    res = _check_shape(session, spec, known_flavors)
    if run_as is not None:
        run_as.check(user.name, user.unix_user, is_admin=user.is_admin)
    _check_workdir(spec.workdir)
    level, mode = parse_topology(spec.topology) if spec.topology else (None, None)
    signal_name, grace_s = parse_signal(spec.signal) if spec.signal else ("SIGUSR1", 30.0)
    if spec.checkpoint_grace_s is not None:
        grace_s = spec.checkpoint_grace_s
    indices, max_running = parse_array(spec.array) if spec.array else (None, None)
    _check_bounds(session, spec.queue, spec.min_runtime_s, grace_s)
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
    )
    _check_feasible(session, shape)
    _check_dependency(session, user, spec.dependency)
    count = len(indices) if indices is not None else 1
    _check_stored(spec, count)
    number = _next_number(session, count)
    numbers = _task_numbers(number, count)
    # expand_array's naming (Slurm's): task ``<number>_<index>``
    ids = [f"{number}_{i}" for i in indices] if indices is not None else [str(number)]
    output = spec.output
    if output is None and spec.script is not None:
        output = default_output(indices is not None)
    common = {
        "number": number,
        "user_id": user.id,
        "unix_user": user.unix_user,
        "queue": spec.queue,
        "name": spec.name,
        "state": JobState.PENDING.value,
        "reason": "",
        "script": spec.script,
        "workdir": spec.workdir,
        "submit_dir": spec.submit_dir or spec.workdir,
        "submit_host": spec.submit_host,
        "export": spec.export,
        "env": dict(spec.env),
        "flavor": res.flavor,
        "workers": res.workers,
        "gpus_per_worker": res.gpus_per_worker,
        "distinct_nodes": res.distinct_nodes,
        "ntasks_per_node": res.ntasks_per_node,
        "cpus_per_task": spec.cpus_per_task or 0,
        "mem_per_node_mb": spec.mem_mb(),
        "cpus_per_worker": res.cpus_per_worker,
        "mem_per_worker_gb": res.mem_per_worker_gb,
        "output": output,
        "error": spec.error,
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
        "requeue": spec.requeue,
        "requeue_on_failure": False,  # Slurm's --requeue: node failure and preemption only
        "restart_count": 0,
        "array_parent": str(number) if indices is not None else None,
        "array_max_running": max_running,
        "array_spec": spec.array if indices is not None else None,
        "submit_t_s": now_t_s,
        "updated_t_s": now_t_s,
    }
    rows = [
        {
            "id": job_id,
            "task_number": numbers[i],
            "command": list(spec.command or [str(script_path(spool_dir, job_id))]),
            "array_index": indices[i] if indices is not None else None,
        }
        for i, job_id in enumerate(ids)
    ]
    stored = insert_jobs(session, common, rows)
    gpus = res.workers * res.gpus_per_worker
    insert_events(session, now_t_s, "submitted", f"{user.name} -> {spec.queue}: {gpus} GPUs", ids)
    request_wake(session)
    return stored


def list_jobs(
    session: Session,
    actor: User,
    *,
    states: list[str] | None = None,
    queue: str | None = None,
    user: str | None = None,
    array: str | None = None,
    finished_within_s: float | None = None,
    since_t_s: float | None = None,
    until_t_s: float | None = None,
    now_t_s: float = 0.0,
    limit: int | None = None,
    offset: int = 0,
    newest_first: bool = False,
) -> list[tuple[JobRow, str]]:
    """Jobs with their user's name, oldest first (or newest first); a non-admin sees only
    their own.

    ``finished_within_s``: finished jobs only if they ended that recently before ``now_t_s``
    (squeue's MinJobAge). ``since_t_s``/``until_t_s``: jobs waiting or running at some moment
    of that window, i.e. submitted by its end and not ended before its start (sacct's
    ``--starttime``/``--endtime``).
    """
    known = [st.value for st in JobState]
    for st in states or []:
        if st not in known:
            raise Invalid("state", f"unknown state {st!r}", f"one of {', '.join(known)}")
    stmt = select(JobRow, User.name).join(User, JobRow.user_id == User.id)
    if not actor.is_admin:
        stmt = stmt.where(JobRow.user_id == actor.id)
    if states:
        stmt = stmt.where(JobRow.state.in_(states))
    if queue is not None:
        stmt = stmt.where(JobRow.queue == queue)
    if user is not None:
        stmt = stmt.where(User.name == user)
    if array is not None:
        stmt = stmt.where(JobRow.array_parent == array)
    if finished_within_s is not None:
        recent = JobRow.end_t_s >= now_t_s - finished_within_s
        stmt = stmt.where(or_(JobRow.state.in_(ACTIVE_STATES), recent))
    if until_t_s is not None:
        stmt = stmt.where(JobRow.submit_t_s <= until_t_s)
    if since_t_s is not None:
        stmt = stmt.where(or_(JobRow.end_t_s.is_(None), JobRow.end_t_s >= since_t_s))
    if newest_first:
        stmt = stmt.order_by(JobRow.number.desc(), JobRow.array_index.desc())
    else:
        stmt = stmt.order_by(JobRow.number, JobRow.array_index)
    stmt = stmt.limit(limit).offset(offset or None)
    return list(session.execute(stmt))


def _check_id(job_id: str) -> None:
    """Only what could be a job id reaches the store (``12`` or ``12_3``)."""
    if not _JOB_ID.fullmatch(job_id):
        raise NotFound(f"no job {job_id[:64]!r}")


def get_job(session: Session, actor: User, job_id: str) -> tuple[JobRow, str]:
    """A job the actor may see. Another user's job is NotFound, not Forbidden: ids don't leak.
    An array task is also found by its own number (its ``SLURM_JOB_ID``)."""
    _check_id(job_id)
    row = session.get(JobRow, job_id)
    if row is None and job_id.isdigit():  # an array task's own number (not the array's)
        row = session.scalars(
            select(JobRow).where(JobRow.task_number == int(job_id), JobRow.number != int(job_id))
        ).first()
    if row is None or (not actor.is_admin and row.user_id != actor.id):
        raise NotFound(f"no job {job_id!r}")
    user = session.get(User, row.user_id)
    return row, user.name if user else "?"


def _targets(session: Session, actor: User, job_id: str) -> list[tuple[JobRow, str]]:
    """The job ``job_id``, or every task of the array whose parent id it is."""
    if session.get(JobRow, job_id) is not None:
        return [get_job(session, actor, job_id)]
    stmt = select(JobRow, User.name).join(User, JobRow.user_id == User.id)
    stmt = stmt.where(JobRow.array_parent == job_id).order_by(JobRow.array_index)
    if not actor.is_admin:
        stmt = stmt.where(JobRow.user_id == actor.id)
    targets = [(row, name) for row, name in session.execute(stmt)]
    if not targets:
        raise NotFound(f"no job {job_id!r}")
    return targets


def cancel_job(session: Session, actor: User, job_id: str, now_t_s: float) -> list[tuple[Any, str]]:
    """Pending jobs end at once; started ones become CANCELLING and the loop stops them.

    An array's parent id (``12`` for ``12_0..12_9``) cancels every task, in two bulk
    statements (:func:`_cancel_array`). Cancelling a finished job changes nothing (like a
    repeated ``scancel``). Each change is a compare-and-set from the states a cancel may leave
    (:mod:`railyard.control.transitions`): a job the loop finished or started since we read it
    is never overwritten with a stale state. Returns each job as it is now, with its user.
    """
    _check_id(job_id)
    reason = f"cancelled by {actor.name}"[:256]
    ended_values = {"state": JobState.CANCELLED.value, "end_t_s": now_t_s, "reason": reason,
                    "updated_t_s": now_t_s}  # fmt: skip
    stopping_values = {"state": JobState.CANCELLING.value, "reason": reason,
                       "updated_t_s": now_t_s}  # fmt: skip
    if session.get(JobRow, job_id) is None and job_id.isdigit():
        return cancel_array(
            session, actor, job_id, now_t_s, ended_values, stopping_values, CANCELLABLE_STARTED
        )
    targets = [get_job(session, actor, job_id)]
    ids = [row.id for row, _ in targets]
    ended = transition_many(session, ids, [JobState.PENDING], ended_values, retry_conflicts=True)
    stopping = transition_many(
        session, ids, CANCELLABLE_STARTED, stopping_values, retry_conflicts=True
    )
    cancelled(session, actor, now_t_s, ended, stopping)
    return targets


CANCELLABLE_STARTED = (JobState.STARTING, JobState.RUNNING, JobState.PREEMPTING)


def hold_job(
    session: Session, actor: User, job_id: str, now_t_s: float
) -> list[tuple[JobRow, str]]:
    """Keep a pending job from starting (``scontrol hold``); an array id holds its pending
    tasks. A job that has started cannot be held (409). Returns the jobs now held.

    Compare-and-set on ``pending``: a job the loop started since we read it stays unheld."""
    _check_id(job_id)
    targets = _targets(session, actor, job_id)
    kinds: dict[str, list[str]] = {"user": [], "admin": []}
    for row, _ in targets:
        kind = "admin" if actor.is_admin and row.user_id != actor.id else "user"
        if row.state == JobState.PENDING.value and not (row.hold == "admin" and kind == "user"):
            kinds[kind].append(row.id)  # an admin's hold stays one
    held: set[str] = set()
    for kind, ids in kinds.items():
        values = {"hold": kind, "reason": HOLD_REASONS[kind], "updated_t_s": now_t_s}
        for changed in transition_many(
            session, ids, [JobState.PENDING], values, retry_conflicts=True
        ):
            held.add(changed)
            record(session, now_t_s, "hold", f"{actor.name}: {HOLD_REASONS[kind]}", changed)
    done = [(r, n) for r, n in targets if r.id in held or (r.hold and r.state == "pending")]
    if not done:
        state = targets[0][0].state if len(targets) == 1 else "past pending"
        raise Conflict(f"job {job_id} is {state}: only a pending job can be held")
    request_wake(session)
    return done


def release_job(
    session: Session, actor: User, job_id: str, now_t_s: float
) -> list[tuple[JobRow, str]]:
    """Let held jobs start again (``scontrol release``); releasing a job that is not held
    changes nothing. Only an admin releases an admin's hold (403).

    Compare-and-set on the hold it read: a hold placed meanwhile is not released unseen."""
    _check_id(job_id)
    targets = _targets(session, actor, job_id)
    held = [(r, n) for r, n in targets if r.hold is not None]
    for row, _ in held:
        if row.hold == "admin" and not actor.is_admin:
            raise Forbidden(f"job {row.id} was held by an admin: only an admin can release it")
    released = []
    for row, name in held:
        pending = row.state == JobState.PENDING.value
        stmt = update(JobRow).where(JobRow.id == row.id, JobRow.hold == row.hold)
        values = {"hold": None, "updated_t_s": now_t_s, **({"reason": ""} if pending else {})}
        stmt = stmt.where(JobRow.state == row.state).values(**values).returning(JobRow.id)
        if session.scalars(stmt.execution_options(synchronize_session=False)).first():
            session.expire(row)
            record(session, now_t_s, "release", f"{actor.name}: released", row.id)
            released.append((row, name))
    request_wake(session)
    return released
