"""What a job's queue says at submit: which queue it lands in (a partition list's first that
admits it, a parent's default sub-queue), whether the user may submit there, the node pool it
runs on, and the bounds on what the job may claim for itself (priority, protection from
preemption, a checkpoint's grace, a deadline without a time limit). Read once per
transaction (``once``), so a batch or a group commit pays for them once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.errors import Forbidden, Invalid
from railyard.control.store.bulk import once, queue_settings
from railyard.control.store.tables import QueueRow, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases.priority import job_priority
from railyard.control.usecases.queues import member_queues, parent_map, path
from railyard.sched.limits import min_runtime_bound_s

DEFAULT_SIGNAL = "SIGUSR1"  # what a preempted job is warned with, unless --signal says
DEFAULT_GRACE_S = 30.0  # its time to checkpoint, unless --signal or checkpoint_grace_s say


@dataclass(frozen=True)
class Claims:
    """What the job claims for itself, within its queue's bounds: the priority it is stored
    with, and its checkpoint grace."""

    priority: int
    grace_s: float


def check_queue(session: Session, user: User, queue: str) -> str | None:
    """The queue's node pool (None: unpooled nodes) once ``user`` may submit to ``queue``."""
    _check_queue(session, user, queue)
    return queue_pool(session, queue)


def claims(session: Session, user: User, spec: JobSubmit) -> Claims:
    """What ``spec`` claims, checked against its (single, resolved) queue's bounds."""
    grace_s = spec.signal.lead_s if spec.signal else DEFAULT_GRACE_S
    if spec.checkpoint_grace_s is not None:
        grace_s = spec.checkpoint_grace_s
    _check_bounds(session, spec.queue, spec.min_runtime_s, grace_s)
    if spec.deadline_t_s is not None and spec.time is None:
        _check_deadline(session, spec.queue)
    return Claims(job_priority(session, user, spec), grace_s)


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


def _check_deadline(session: Session, queue: str) -> None:
    """A deadline is judged against the job's time limit (`sched.limits.latest_start_t_s`):
    without one, no start could be sure to end in time (sbatch asks for a limit too), unless
    the queue gives one."""
    row = queue_settings(session, queue)
    if row is None or (row.default_time_s is None and row.max_time_s is None):
        raise Invalid(
            "deadline_t_s",
            f"a deadline needs a time limit, and queue {queue} gives none",
            "add --time",
        )
