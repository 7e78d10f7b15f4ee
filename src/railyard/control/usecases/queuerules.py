"""What a job's queue says at submit: which queue it lands in (down to a parent's default
sub-queue), whether the user may submit there, the node pool it runs on, and the bounds on
what the job claims for itself. Each is read once per transaction (``once``), so a batch or a
group commit pays for them once.

Priority: preemption lets a higher-priority job evict a running one, so a priority is a claim
on other users' GPUs: as Kueue's ``WorkloadPriorityClass`` (chosen from those an admin made)
and Slurm's ``--nice`` (users may only lower theirs), a plain member of a queue asks at most
the queue's ``max_priority``; admins may ask any. ``nice`` lowers the priority, as in Slurm;
a negative nice raises it, so it is an admin's too. The protection from preemption
(``min_runtime_s``) and a checkpoint's grace are bounded by the queue the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from railyard.client.bounds import INT32_MAX
from railyard.client.values import PRIORITY_CLASSES, priority_label
from railyard.control.errors import Forbidden, Invalid
from railyard.control.store.bulk import once, queue_settings
from railyard.control.store.tables import DEFAULT_MAX_PRIORITY, QueueRow, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases.queues import member_queues, parent_map, path
from railyard.sched.limits import min_runtime_bound_s

DEFAULT_PRIORITY = PRIORITY_CLASSES["normal"]  # railyard.sched.model.PriorityClass.NORMAL
DEFAULT_SIGNAL = "SIGUSR1"  # what a preempted job is warned with, unless --signal says
DEFAULT_GRACE_S = 30.0  # its time to checkpoint, unless --signal or checkpoint_grace_s say


@dataclass(frozen=True)
class QueueTerms:
    """What a job's queue grants it: the queues from the root down to it (the nearest that
    sets a node pool or container mounts decides them), its node pool (None: the unpooled
    nodes), the priority it is stored with, and its checkpoint grace."""

    lineage: list[str]
    pool: str | None
    priority: int
    grace_s: float


def queue_terms(session: Session, user: User, spec: JobSubmit) -> QueueTerms:
    """``spec``'s (single, resolved) queue, checked: Invalid or Forbidden says why not (an
    unknown queue, a parent, one the user may not use, a claim past one of its bounds)."""
    lineage, pool = _check_queue(session, user, spec.queue)
    # Kept in the transaction's memo: the session's identity map holds rows weakly, so a
    # batch would read the queue again per job.
    row = queue_settings(session, spec.queue)
    grace_s = spec.signal.lead_s if spec.signal else DEFAULT_GRACE_S
    if spec.checkpoint_grace_s is not None:
        grace_s = spec.checkpoint_grace_s
    if row is not None:
        _check_bounds(row, spec.queue, spec.min_runtime_s, grace_s)
    if spec.deadline_t_s is not None and spec.time is None:
        _check_deadline(row, spec.queue)
    return QueueTerms(lineage, pool, _priority(row, user, spec), grace_s)


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


def _check_queue(session: Session, user: User, queue: str) -> tuple[list[str], str | None]:
    """The queue's lineage and node pool, once it exists, is a leaf, and the user may submit
    to it. Hints name only the queues the user may see (their own and those below), never the
    rest of the tree."""
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
    lineage = path(parents, queue)
    if not user.is_admin and not mine.intersection(lineage):
        mayuse = ", ".join(visible())
        raise Forbidden(
            f"user {user.name!r} may not submit to queue {queue!r}",
            hint=f"queues you may use: {mayuse}"
            if mayuse
            else "an admin adds you to a queue: "
            f"railyard admin queues members add QUEUE {user.name}",
        )
    if queue in {p for p in parents.values() if p is not None}:
        leaves = [n for n in visible() if n not in parents.values()]
        raise Invalid("queue", f"queue {queue!r} has sub-queues", f"submit to one of {leaves}")
    pools = once(
        session, "pools", lambda: dict(session.execute(select(QueueRow.name, QueueRow.pool)).all())
    )
    pool = next((str(pools[name]) for name in reversed(lineage) if pools.get(name)), None)
    return lineage, pool


def job_priority(session: Session, user: User, spec: JobSubmit) -> int:
    """The priority to store for ``spec`` in its queue (after ``nice``); see :func:`queue_terms`."""
    return _priority(queue_settings(session, spec.queue), user, spec)


def _check_bounds(row: Row[Any], queue: str, min_runtime_s: float, grace_s: float) -> None:
    """What a job may claim for itself is bounded by its queue (an admin's setting, or for
    the protection from preemption the default bound)."""
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


def _check_deadline(row: Row[Any] | None, queue: str) -> None:
    """A deadline is judged against the job's time limit (`sched.limits.latest_start_t_s`):
    without one, no start could be sure to end in time (sbatch asks for a limit too), unless
    the queue gives one."""
    if row is None or (row.default_time_s is None and row.max_time_s is None):
        raise Invalid(
            "deadline_t_s",
            f"a deadline needs a time limit, and queue {queue} gives none",
            "add --time",
        )


def check_nice(user: User, nice: int) -> None:
    """A negative nice raises a job's priority: an admin's to give (Slurm's rule), at submit
    and at update alike; Forbidden (403) for a plain user."""
    if nice < 0 and not user.is_admin:
        raise Forbidden(
            f"nice {nice} raises the job's priority: only an admin may give a negative nice",
            hint="give --nice 0 or more, or ask an admin",
        )


def _priority(row: Row[Any] | None, user: User, spec: JobSubmit) -> int:
    """The priority to store for ``spec`` (after ``nice``); Forbidden (403) when a plain user
    asks above the queue's bound or gives a negative nice. A job that asks no priority gets
    the default class, or the queue's bound where that is lower, so asking nothing is never
    refused."""
    bound = row.max_priority if row is not None else DEFAULT_MAX_PRIORITY
    if spec.priority is None:
        base = DEFAULT_PRIORITY if user.is_admin else min(DEFAULT_PRIORITY, bound)
    else:
        base = spec.priority.value
    value = min(max(base - spec.nice, 0), INT32_MAX)
    check_nice(user, spec.nice)
    if user.is_admin:
        return value
    if value > bound:
        asked = spec.priority.shown if spec.priority is not None else str(base)
        shown = asked if spec.nice == 0 else f"{asked} (nice {spec.nice}: {value})"
        raise Forbidden(
            f"priority {shown} is above what queue {spec.queue!r} allows its members",
            hint=f"at most {priority_label(bound)}; ask an admin",
        )
    return value
