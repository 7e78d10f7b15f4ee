"""Job use-cases: submit (with every check a job must pass before it is stored), list, show,
cancel. Plain functions on a Session and the acting User; the API routes call them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from railyard.control.effects import record, request_wake
from railyard.control.errors import Forbidden, Invalid, NotFound
from railyard.control.limits import JOB_ID_PATTERN, MAX_SUBMIT_STORED_BYTES
from railyard.control.paths import script_path
from railyard.control.queues import member_queues, parent_map, path
from railyard.control.schemas import JobSubmit, parse_array, parse_signal, parse_topology
from railyard.control.tables import Counter, JobRow, JobState, NodeRow, User
from railyard.control.transitions import transition_many
from railyard.sched.accounting import expand_array
from railyard.sched.model import Job

JOB_COUNTER = "job"
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
    parents = parent_map(session)
    mine = set() if user.is_admin else member_queues(session, user)

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


def _check_shape(session: Session, spec: JobSubmit, known: set[str] | None) -> tuple[str, int, int]:
    """(flavor, workers, gpus_per_worker), checked against the nodes table."""
    workers, per_worker = spec.shape()
    nodes = list(session.execute(select(NodeRow.name, NodeRow.flavor, NodeRow.gpus)))
    flavors = set(known) if known is not None else {f for _, f, _ in nodes}
    flavor = spec.flavor
    if flavor is None:
        if nodes:
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
    if sizes and per_worker > max(sizes):
        raise Invalid(
            "gpus_per_worker",
            f"{per_worker} GPUs per worker, but the largest {flavor} node has {max(sizes)}",
            f"use more workers with at most {max(sizes)} GPUs each",
        )
    if sizes and workers * per_worker > sum(sizes):
        raise Invalid(
            "gpus",
            f"{workers * per_worker} GPUs asked, the cluster has {sum(sizes)} {flavor}",
            f"ask for at most {sum(sizes)}",
        )
    return flavor, workers, per_worker


def submit(
    session: Session,
    user: User,
    spec: JobSubmit,
    now_t_s: float,
    *,
    state_dir: Path,
    known_flavors: set[str] | None = None,
) -> list[JobRow]:
    """Validate and store one job, or one row per array task (ids ``<n>_<i>``)."""
    _check_queue(session, user, spec.queue)
    flavor, workers, per_worker = _check_shape(session, spec, known_flavors)
    _check_workdir(spec.workdir)
    level, mode = parse_topology(spec.topology) if spec.topology else (None, None)
    signal_name, grace_s = parse_signal(spec.signal) if spec.signal else ("SIGUSR1", 30.0)
    if spec.checkpoint_grace_s is not None:
        grace_s = spec.checkpoint_grace_s
    indices, max_running = parse_array(spec.array) if spec.array else (None, None)
    _check_stored(spec, len(indices) if indices is not None else 1)
    number = _next_number(session)
    base = Job(id=str(number), queue=spec.queue, flavor=flavor, workers=workers)
    ids = [j.id for j in expand_array(base, indices)] if indices is not None else [base.id]
    rows = []
    for i, job_id in enumerate(ids):
        command = spec.command or ["bash", str(script_path(state_dir, job_id))]
        row = JobRow(
            id=job_id,
            number=number,
            user_id=user.id,
            queue=spec.queue,
            name=spec.name,
            state=JobState.PENDING.value,
            reason="",
            command=list(command),
            script=spec.script,
            workdir=spec.workdir,
            env=dict(spec.env),
            flavor=flavor,
            workers=workers,
            gpus_per_worker=per_worker,
            priority=spec.priority_value(),
            preemptible=spec.preemptible,
            walltime_s=spec.walltime_s(),
            topology_level=level,
            topology_mode=mode,
            min_runtime_s=spec.min_runtime_s,
            checkpoint_grace_s=grace_s,
            preempt_signal=signal_name,
            requeue_on_failure=spec.requeue,
            restart_count=0,
            array_parent=str(number) if indices is not None else None,
            array_index=indices[i] if indices is not None else None,
            array_max_running=max_running,
            submit_t_s=now_t_s,
            updated_t_s=now_t_s,
        )
        session.add(row)
        rows.append(row)
        gpus = workers * per_worker
        record(session, now_t_s, "submitted", f"{user.name} -> {spec.queue}: {gpus} GPUs", job_id)
    session.flush()
    request_wake(session)
    return rows


def list_jobs(
    session: Session,
    actor: User,
    *,
    states: list[str] | None = None,
    queue: str | None = None,
    user: str | None = None,
    limit: int | None = None,
) -> list[tuple[JobRow, str]]:
    """Jobs with their user's name, oldest first; a non-admin sees only their own."""
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
    stmt = stmt.order_by(JobRow.number, JobRow.array_index).limit(limit)
    return list(session.execute(stmt))


def _check_id(job_id: str) -> None:
    """Only what could be a job id reaches the store (``12`` or ``12_3``)."""
    if not _JOB_ID.fullmatch(job_id):
        raise NotFound(f"no job {job_id[:64]!r}")


def get_job(session: Session, actor: User, job_id: str) -> tuple[JobRow, str]:
    """A job the actor may see. Another user's job is NotFound, not Forbidden: ids don't leak."""
    _check_id(job_id)
    row = session.get(JobRow, job_id)
    if row is None or (not actor.is_admin and row.user_id != actor.id):
        raise NotFound(f"no job {job_id!r}")
    user = session.get(User, row.user_id)
    return row, user.name if user else "?"


def cancel_job(
    session: Session, actor: User, job_id: str, now_t_s: float
) -> list[tuple[JobRow, str]]:
    """Pending jobs end at once; started ones become CANCELLING and the loop stops them.

    An array's parent id (``12`` for ``12_0..12_9``) cancels every task. Cancelling a finished
    job changes nothing (like a repeated ``scancel``). Each change is a compare-and-set from
    the states a cancel may leave (:mod:`railyard.control.transitions`): a job the loop
    finished or started since we read it is never overwritten with a stale state.
    """
    _check_id(job_id)
    if session.get(JobRow, job_id) is not None:
        targets = [get_job(session, actor, job_id)]
    else:
        stmt = select(JobRow, User.name).join(User, JobRow.user_id == User.id)
        stmt = stmt.where(JobRow.array_parent == job_id).order_by(JobRow.array_index)
        if not actor.is_admin:
            stmt = stmt.where(JobRow.user_id == actor.id)
        targets = list(session.execute(stmt))
        if not targets:
            raise NotFound(f"no job {job_id!r}")
    ids = [row.id for row, _ in targets]
    reason = f"cancelled by {actor.name}"[:256]
    ended = transition_many(
        session,
        ids,
        [JobState.PENDING],
        {"state": JobState.CANCELLED.value, "end_t_s": now_t_s, "reason": reason,
         "updated_t_s": now_t_s},
    )  # fmt: skip
    stopping = transition_many(
        session,
        ids,
        CANCELLABLE_STARTED,
        {"state": JobState.CANCELLING.value, "reason": reason, "updated_t_s": now_t_s},
    )
    for changed, to in ((ended, JobState.CANCELLED), (stopping, JobState.CANCELLING)):
        for changed_id in changed:
            record(session, now_t_s, "cancel", f"{actor.name}: -> {to.value}", changed_id)
    if ended or stopping:
        request_wake(session)
    return targets


CANCELLABLE_STARTED = (JobState.STARTING, JobState.RUNNING, JobState.PREEMPTING)
