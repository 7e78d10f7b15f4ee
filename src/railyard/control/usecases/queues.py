"""Queue use-cases: the tenancy tree, its quotas, and who may submit where.

Plain functions on a Session and the acting User (see :mod:`railyard.control.store.effects` for
how they commit and wake the loop); the API routes call them and add nothing.
"""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railyard.control.adminschemas import QueueCreate, QueueOut, QueueUpdate
from railyard.control.errors import Conflict, Invalid, NotFound
from railyard.control.store.effects import record, request_wake
from railyard.control.store.tables import (
    ACTIVE_STATES,
    HOLDING_STATES,
    JobRow,
    QueueMember,
    QueueRow,
    UsageRow,
    User,
)
from railyard.control.usecases.users import require_admin, user_by_name


def parent_map(session: Session) -> dict[str, str | None]:
    return dict(session.execute(select(QueueRow.name, QueueRow.parent)).all())


def path(parents: dict[str, str | None], name: str) -> list[str]:
    """Queue names from the root down to ``name``."""
    out = [name]
    while (p := parents.get(out[-1])) is not None and p not in out:
        out.append(p)
    return out[::-1]


def get_queue(session: Session, name: str) -> QueueRow:
    row = session.get(QueueRow, name)
    if row is None:
        raise NotFound(f"no queue {name!r}")
    return row


def _check_parent(parents: dict[str, str | None], name: str, parent: str | None) -> None:
    if parent is None:
        return
    if parent not in parents:
        raise Invalid("parent", f"unknown queue {parent!r}", f"known: {', '.join(sorted(parents))}")
    if name in path(parents, parent):
        raise Invalid("parent", f"queue {parent!r} is below {name!r}: that would make a cycle")


def create_queue(session: Session, actor: User, spec: QueueCreate, now_t_s: float) -> QueueRow:
    require_admin(actor)
    parents = parent_map(session)
    if spec.name in parents:
        raise Conflict(f"queue {spec.name!r} exists", hint="update it with PATCH /v1/queues/NAME")
    _check_parent(parents, spec.name, spec.parent)
    row = QueueRow(**spec.model_dump(), created_t_s=now_t_s)
    session.add(row)
    session.flush()
    one_default(session, row)
    record(session, now_t_s, "queue", f"{actor.name} created queue {spec.name}", None)
    request_wake(session)
    return row


_NULLABLE = {
    "parent",
    "default_time_s",
    "max_time_s",
    "max_min_runtime_s",
    "max_checkpoint_grace_s",
    "idle_limit_s",
    "pool",
    "container_mounts",
}
"""Fields a null in an update clears (a root queue, no limit); others keep their value."""


def update_queue(
    session: Session, actor: User, name: str, spec: QueueUpdate, now_t_s: float
) -> QueueRow:
    """Fields left out of the request keep their value; ``"parent": null`` makes it a root."""
    require_admin(actor)
    row = get_queue(session, name)
    changes = spec.model_dump(exclude_unset=True)
    if "parent" in changes:
        _check_parent(parent_map(session), name, changes["parent"])
    for key, value in changes.items():
        if value is not None or key in _NULLABLE:
            setattr(row, key, value)
    one_default(session, row)
    record(session, now_t_s, "queue", f"{actor.name} updated queue {name}: {changes}", None)
    request_wake(session)
    return row


def one_default(session: Session, row: QueueRow) -> None:
    """A default queue (Slurm's Default=YES) is its parent's only one: the others lose it."""
    if not row.is_default:
        return
    siblings = select(QueueRow).where(
        QueueRow.is_default, QueueRow.name != row.name, QueueRow.parent.is_(row.parent)
        if row.parent is None else QueueRow.parent == row.parent
    )  # fmt: skip
    for other in session.scalars(siblings):
        other.is_default = False


def add_member(session: Session, actor: User, queue: str, user_name: str) -> None:
    require_admin(actor)
    get_queue(session, queue)
    user = user_by_name(session, user_name)
    if session.get(QueueMember, (queue, user.id)) is None:
        session.add(QueueMember(queue=queue, user_id=user.id))
        session.flush()


def remove_member(session: Session, actor: User, queue: str, user_name: str) -> None:
    require_admin(actor)
    get_queue(session, queue)
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
    paths = {r.name: path(parents, r.name) for r in rows}
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
    # Counts in SQL: ten thousand pending jobs are one row per queue and state, not ten
    # thousand rows (the dashboard's queues page, GET /v1/queues); placements only of the jobs
    # that hold GPUs.
    by_state = select(JobRow.queue, JobRow.state, func.count()).where(
        JobRow.state.in_(ACTIVE_STATES)
    )
    for queue, state, count in session.execute(by_state.group_by(JobRow.queue, JobRow.state)):
        running = state in HOLDING_STATES
        for ancestor in paths.get(queue, [queue]):
            counts[(ancestor, "running" if running else "pending")] += count
    holding = select(
        JobRow.queue, JobRow.flavor, JobRow.placement, JobRow.workers, JobRow.gpus_per_worker
    ).where(JobRow.state.in_(HOLDING_STATES))
    for queue, flavor, placement, workers, per_worker in session.execute(holding):
        for ancestor in paths.get(queue, [queue]):
            used[ancestor][flavor] += _job_gpus(placement, workers, per_worker)
    usage_keys = {f"queue:{n}": n for n in paths}  # as the loop stores it (convert.usage_keys)
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
            priority_preemption=r.priority_preemption,
            default_time_s=r.default_time_s,
            max_time_s=r.max_time_s,
            max_min_runtime_s=r.max_min_runtime_s,
            max_checkpoint_grace_s=r.max_checkpoint_grace_s,
            idle_limit_s=r.idle_limit_s,
            pool=r.pool,
            container_mounts=r.container_mounts,
            is_default=r.is_default,
            max_priority=r.max_priority,
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
