"""What the control plane does on request, as plain functions on a Session and the acting User.

No HTTP here: the API maps the domain errors (``NotFound``, ``Forbidden``, ``Conflict``,
``Invalid``; defined with the schemas, re-exported here) to status codes, and the service loop
or ``railyard up`` may call the same functions; users and tokens live in ``auth``. Functions
flush but never commit: the caller's ``Store.session()`` commits once at the end, so a refused
request changes nothing. A change the service loop must see marks the session
(:func:`request_wake`); the API wakes the loop after the commit.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from railyard.control.auth import require_admin, user_by_name
from railyard.control.schemas import Conflict as Conflict
from railyard.control.schemas import Forbidden as Forbidden
from railyard.control.schemas import Invalid as Invalid
from railyard.control.schemas import (
    JobSubmit,
    NodeOut,
    QueueCreate,
    QueueOut,
    QueueUpdate,
    parse_array,
    parse_signal,
    parse_topology,
)
from railyard.control.schemas import NotFound as NotFound
from railyard.control.schemas import ServiceError as ServiceError
from railyard.control.tables import (
    Counter,
    EventRow,
    JobRow,
    JobState,
    NodeRow,
    QueueMember,
    QueueRow,
    UsageRow,
    User,
)
from railyard.sched.accounting import expand_array
from railyard.sched.model import Job, NodeState

JOB_COUNTER = "job"
ACTIVE_STATES = tuple(s.value for s in JobState if not s.finished)
HOLDING_STATES = tuple(s.value for s in JobState if s.holds_gpus)


# -- files and wake-ups --------------------------------------------------------------------------


def job_dir(state_dir: Path, job_id: str) -> Path:
    return state_dir / "jobs" / job_id


def log_path(state_dir: Path, job_id: str, rank: int) -> Path:
    """Where the executor writes rank ``rank`` (``LaunchSpec.log_dir`` is ``.../logs``)."""
    return job_dir(state_dir, job_id) / "logs" / f"rank-{rank}.log"


def script_path(state_dir: Path, job_id: str) -> Path:
    """Where the service loop writes ``JobRow.script`` before it starts the job."""
    return job_dir(state_dir, job_id) / "script.sh"


def request_wake(session: Session) -> None:
    session.info["wake"] = True


def wants_wake(session: Session) -> bool:
    """True once after a change the service loop must see; the caller wakes it after commit."""
    return bool(session.info.pop("wake", False))


def _event(session: Session, now_t_s: float, kind: str, message: str, job: str | None) -> None:
    session.add(EventRow(t_s=now_t_s, job_id=job, kind=kind, message=message))


# -- queues --------------------------------------------------------------------------------------


def _parents(session: Session) -> dict[str, str | None]:
    return dict(session.execute(select(QueueRow.name, QueueRow.parent)).all())


def _path(parents: dict[str, str | None], name: str) -> list[str]:
    """Queue names from the root down to ``name``."""
    out = [name]
    while (p := parents.get(out[-1])) is not None and p not in out:
        out.append(p)
    return out[::-1]


def _queue(session: Session, name: str) -> QueueRow:
    row = session.get(QueueRow, name)
    if row is None:
        raise NotFound(f"no queue {name!r}")
    return row


def _check_parent(parents: dict[str, str | None], name: str, parent: str | None) -> None:
    if parent is None:
        return
    if parent not in parents:
        raise Invalid("parent", f"unknown queue {parent!r}", f"known: {', '.join(sorted(parents))}")
    if name in _path(parents, parent):
        raise Invalid("parent", f"queue {parent!r} is below {name!r}: that would make a cycle")


def create_queue(session: Session, actor: User, spec: QueueCreate, now_t_s: float) -> QueueRow:
    require_admin(actor)
    parents = _parents(session)
    if spec.name in parents:
        raise Conflict(f"queue {spec.name!r} exists", hint="update it with PUT /v1/queues/NAME")
    _check_parent(parents, spec.name, spec.parent)
    row = QueueRow(**spec.model_dump(), created_t_s=now_t_s)
    session.add(row)
    session.flush()
    _event(session, now_t_s, "queue", f"{actor.name} created queue {spec.name}", None)
    request_wake(session)
    return row


def update_queue(
    session: Session, actor: User, name: str, spec: QueueUpdate, now_t_s: float
) -> QueueRow:
    """Fields left out of the request keep their value; ``"parent": null`` makes it a root."""
    require_admin(actor)
    row = _queue(session, name)
    changes = spec.model_dump(exclude_unset=True)
    if "parent" in changes:
        _check_parent(_parents(session), name, changes["parent"])
    for key, value in changes.items():
        if value is not None or key == "parent":
            setattr(row, key, value)
    _event(session, now_t_s, "queue", f"{actor.name} updated queue {name}: {changes}", None)
    request_wake(session)
    return row


def add_member(session: Session, actor: User, queue: str, user_name: str) -> None:
    require_admin(actor)
    _queue(session, queue)
    user = user_by_name(session, user_name)
    if session.get(QueueMember, (queue, user.id)) is None:
        session.add(QueueMember(queue=queue, user_id=user.id))
        session.flush()


def remove_member(session: Session, actor: User, queue: str, user_name: str) -> None:
    require_admin(actor)
    _queue(session, queue)
    member = session.get(QueueMember, (queue, user_by_name(session, user_name).id))
    if member is None:
        raise NotFound(f"{user_name!r} is not a member of {queue!r}")
    session.delete(member)


def member_queues(session: Session, user: User) -> set[str]:
    stmt = select(QueueMember.queue).where(QueueMember.user_id == user.id)
    return set(session.scalars(stmt))


def _job_gpus(placement: dict[str, list[int]] | None, workers: int, per_worker: int) -> int:
    return sum(len(g) for g in placement.values()) if placement else workers * per_worker


def list_queues(session: Session, actor: User) -> list[QueueOut]:
    """Queues with quota, GPUs in use (subtree), borrowed and decayed fair-share usage.

    A user sees the queues they belong to and everything below them; an admin sees all.
    Borrowed is ``max(0, used - nominal)`` per flavor, nominal summed over the subtree.
    """
    all_rows = list(session.scalars(select(QueueRow).order_by(QueueRow.name)))
    rows = all_rows
    parents = {r.name: r.parent for r in rows}
    paths = {r.name: _path(parents, r.name) for r in rows}
    if not actor.is_admin:
        mine = member_queues(session, actor)
        rows = [r for r in rows if mine.intersection(paths[r.name])]
    members: dict[str, list[str]] = defaultdict(list)
    for queue, name in session.execute(
        select(QueueMember.queue, User.name).join(User).order_by(User.name)
    ):
        members[queue].append(name)
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    counts: dict[tuple[str, str], int] = defaultdict(int)
    nominal: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in all_rows:
        for ancestor in paths[r.name]:
            for flavor, gpus in r.nominal_gpus.items():
                nominal[ancestor][flavor] += gpus
    jobs = select(
        JobRow.queue,
        JobRow.state,
        JobRow.flavor,
        JobRow.placement,
        JobRow.workers,
        JobRow.gpus_per_worker,
    ).where(JobRow.state.in_(ACTIVE_STATES))
    for queue, state, flavor, placement, workers, per_worker in session.execute(jobs):
        for ancestor in paths.get(queue, [queue]):
            running = state in HOLDING_STATES
            counts[(ancestor, "running" if running else "pending")] += 1
            if running:
                used[ancestor][flavor] += _job_gpus(placement, workers, per_worker)
    usage_keys = {"queue:" + "/".join(p): n for n, p in paths.items()}
    usage = {
        usage_keys[k]: v
        for k, v in session.execute(
            select(UsageRow.key, UsageRow.gpu_s).where(UsageRow.key.in_(list(usage_keys)))
        )
    }
    return [
        QueueOut(
            name=r.name,
            parent=r.parent,
            nominal_gpus=r.nominal_gpus,
            borrowing_limit_gpus=r.borrowing_limit_gpus,
            lending_limit_gpus=r.lending_limit_gpus,
            weight=r.weight,
            members=members[r.name],
            used_gpus=dict(used[r.name]),
            borrowed_gpus={
                f: u - nominal[r.name][f] for f, u in used[r.name].items() if u > nominal[r.name][f]
            },
            usage_gpu_s=usage.get(r.name, 0.0),
            pending_jobs=counts[(r.name, "pending")],
            running_jobs=counts[(r.name, "running")],
        )
        for r in rows
    ]


# -- jobs ----------------------------------------------------------------------------------------


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
    parents = _parents(session)
    if queue not in parents:
        known = ", ".join(sorted(parents)) or "none (an admin creates them)"
        raise Invalid("queue", f"unknown queue {queue!r}", f"known queues: {known}")
    if queue in {p for p in parents.values() if p is not None}:
        leaves = sorted(n for n in parents if n not in parents.values())
        raise Invalid("queue", f"queue {queue!r} has sub-queues", f"submit to one of {leaves}")
    if not user.is_admin and not member_queues(session, user).intersection(_path(parents, queue)):
        raise Forbidden(f"user {user.name!r} may not submit to queue {queue!r}")


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
    level, mode = parse_topology(spec.topology) if spec.topology else (None, None)
    signal_name, grace_s = parse_signal(spec.signal) if spec.signal else ("SIGUSR1", 30.0)
    if spec.checkpoint_grace_s is not None:
        grace_s = spec.checkpoint_grace_s
    indices, max_running = parse_array(spec.array) if spec.array else (None, None)
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
        _event(session, now_t_s, "submitted", f"{user.name} -> {spec.queue}: {gpus} GPUs", job_id)
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


def get_job(session: Session, actor: User, job_id: str) -> tuple[JobRow, str]:
    """A job the actor may see. Another user's job is NotFound, not Forbidden: ids don't leak."""
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
    job changes nothing (like a repeated ``scancel``).
    """
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
    for row, _ in targets:
        state = JobState(row.state)
        if state.finished or state is JobState.CANCELLING:
            continue
        if state is JobState.PENDING:
            row.state = JobState.CANCELLED.value
            row.end_t_s = now_t_s
        else:
            row.state = JobState.CANCELLING.value
        row.reason = f"cancelled by {actor.name}"
        row.updated_t_s = now_t_s
        _event(session, now_t_s, "cancel", f"{actor.name}: {state.value} -> {row.state}", row.id)
        request_wake(session)
    return targets


# -- nodes ---------------------------------------------------------------------------------------


def list_nodes(session: Session, actor: User) -> list[NodeOut]:
    used: dict[str, int] = defaultdict(int)
    placements = select(JobRow.placement).where(JobRow.state.in_(HOLDING_STATES))
    for placement in session.scalars(placements):
        for node, gpus in (placement or {}).items():
            used[node] += len(gpus)
    return [
        NodeOut(
            name=n.name,
            flavor=n.flavor,
            gpus=n.gpus,
            gpus_used=used[n.name],
            state=n.state,
            reason=n.reason,
            path=n.path,
        )
        for n in session.scalars(select(NodeRow).order_by(NodeRow.name))
    ]


def _set_node(
    session: Session, actor: User, name: str, state: NodeState, reason: str, now_t_s: float
) -> NodeRow:
    require_admin(actor)
    node = session.get(NodeRow, name)
    if node is None:
        raise NotFound(f"no node {name!r}")
    node.state, node.reason, node.updated_t_s = state.value, reason, now_t_s
    _event(session, now_t_s, state.value, f"{actor.name}: node {name} {reason}".strip(), None)
    request_wake(session)
    return node


def drain_node(session: Session, actor: User, name: str, reason: str, now_t_s: float) -> NodeRow:
    """No new work on the node; running jobs finish (the loop marks it drained when empty)."""
    return _set_node(session, actor, name, NodeState.DRAINING, reason or "drained", now_t_s)


def resume_node(session: Session, actor: User, name: str, now_t_s: float) -> NodeRow:
    return _set_node(session, actor, name, NodeState.READY, "", now_t_s)
