"""Why a pending job waits, in numbers (the job page's "why" panel): its reason in words, its
queue's quota and what the queue uses and borrows, the GPUs of its flavor free now, how many
of its queue's pending jobs come before it, and its queue's and its user's fair-share usage.
The expected start is the twin's (`control.usecases.whatif`): the page asks for it apart,
as it runs the simulator.

Only the job's owner or an admin gets here (`jobviews.job_detail` decides); the figures
about others are counts and shares, never their jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from railyard.control.store.tables import JobRow, JobState, UsageRow, User
from railyard.control.usecases.overview import gpus_by_flavor
from railyard.control.usecases.queues import parent_map, path
from railyard.control.usecases.queueviews import queue_shares
from railyard.sched.decisions import Reason

EXPLAIN = {
    Reason.PRIORITY: "Jobs ahead of it in the queue's order hold or have reserved the GPUs it "
    "could use; it starts when they are done, or earlier if it fits in a gap (backfill).",
    Reason.RESOURCES: "Not enough GPUs of its flavor are free now; it is next and holds a "
    "reservation on the GPUs that free up first.",
    Reason.QUOTA: "GPUs are free, but its queue has used its quota and can borrow no more "
    "from the queues it shares with; it starts when its queue's jobs end or lenders have room.",
    Reason.REQ_NODE_NOT_AVAIL: "It would fit only with nodes that are draining or down.",
    Reason.TOPOLOGY: "Enough GPUs are free, but not within the topology domain it asked for.",
    Reason.FRAGMENTATION: "Enough GPUs are free in total, but not in the shape of its gang.",
    Reason.PREEMPTING: "Jobs were asked to checkpoint and stop for it; their GPUs are held "
    "for it until they do.",
    Reason.UNSCHEDULABLE: "It can never be placed on this cluster or within its queue's "
    "quota as asked: ask for fewer GPUs or another queue.",
    Reason.BAD_CONSTRAINTS: "Its queue or flavor is unknown.",
    Reason.PARTITION_TIME_LIMIT: "Its time limit is above its queue's maximum.",
    Reason.JOB_ARRAY_TASK_LIMIT: "Its array already runs as many tasks as its %N allows.",
    Reason.DEPENDENCY: "It waits for the jobs it depends on.",
    Reason.DEPENDENCY_NEVER_SATISFIED: "A job it depends on ended in a way that can never "
    "satisfy it: cancel it or change its dependency.",
    Reason.JOB_HELD_USER: "Its owner held it: release it to let it start.",
    Reason.JOB_HELD_ADMIN: "An admin held it; only an admin releases it.",
    Reason.BEGIN_TIME: "Its --begin time has not come.",
}


@dataclass(frozen=True)
class Why:
    reason: str
    explanation: str
    queue: str
    flavor: str
    gpus: int  # it asks for
    free_gpus: int  # of its flavor, on ready nodes, now
    nominal_gpus: int  # its queue's quota of its flavor
    used_gpus: int  # its queue's GPUs of its flavor in use
    borrowed_gpus: int
    ahead: int  # its queue's pending jobs before it in the loop's order
    ahead_cluster: int  # every queue's pending jobs of its flavor before it
    queue_usage: float  # the queue's share of the cluster's decayed usage
    queue_entitlement: float  # its fair share
    user_usage_gpu_h: float  # its user's decayed usage in this queue


def explain(reason: str) -> str:
    """The stored reason's leading word in a sentence; "" for one not known."""
    word = reason.split(" ", 1)[0].rstrip(":,;")
    known = {r.value: r for r in Reason}
    return EXPLAIN.get(known[word], "") if word in known else ""


def why_pending(session: Session, row: JobRow, user: str) -> Why | None:
    """The panel for ``row`` (already checked visible); None unless it is pending."""
    if row.state != JobState.PENDING.value:
        return None
    explanation = explain(row.reason)
    owner = session.get(User, row.user_id)
    shares = {s.queue.name: s for s in queue_shares(session, owner)} if owner else {}
    share = shares.get(row.queue)
    flavor = next((f for f in gpus_by_flavor(session) if f.flavor == row.flavor), None)
    before = _before(row)
    ahead = session.scalar(select(func.count()).select_from(JobRow).where(
        *before, JobRow.queue == row.queue))  # fmt: skip
    ahead_cluster = session.scalar(select(func.count()).select_from(JobRow).where(
        *before, JobRow.flavor == row.flavor))  # fmt: skip
    queue_path = "/".join(path(parent_map(session), row.queue))
    keys = {f"user:{queue_path}/{user}", f"user:{row.queue}/{user}"}
    used = session.scalar(select(func.max(UsageRow.gpu_s)).where(UsageRow.key.in_(keys)))
    return Why(
        reason=row.reason, explanation=explanation, queue=row.queue, flavor=row.flavor,
        gpus=row.workers * row.gpus_per_worker, free_gpus=flavor.free if flavor else 0,
        nominal_gpus=share.queue.nominal_gpus.get(row.flavor, 0) if share else 0,
        used_gpus=share.queue.used_gpus.get(row.flavor, 0) if share else 0,
        borrowed_gpus=share.queue.borrowed_gpus.get(row.flavor, 0) if share else 0,
        ahead=int(ahead or 0), ahead_cluster=int(ahead_cluster or 0),
        queue_usage=share.usage_ratio if share else 0.0,
        queue_entitlement=share.entitlement if share else 0.0,
        user_usage_gpu_h=(used or 0.0) / 3600,
    )  # fmt: skip


def _before(row: JobRow) -> list[ColumnElement[bool]]:
    """Pending, not held, and before ``row`` in the loop's order: higher priority, then
    earlier submitted, then the lower job number and array index (`sched.cache.by_arrival`).
    An array's tasks share one submit time and most jobs one priority: without the number the
    count said "0 ahead" of every one of them (issue 60)."""
    index = row.array_index if row.array_index is not None else -1
    later_in_arrival = or_(
        JobRow.submit_t_s < row.submit_t_s,
        and_(JobRow.submit_t_s == row.submit_t_s, or_(
            JobRow.number < row.number,
            and_(JobRow.number == row.number,
                 func.coalesce(JobRow.array_index, -1) < index))),
    )  # fmt: skip
    return [
        JobRow.state == JobState.PENDING.value, JobRow.id != row.id, JobRow.hold.is_(None),
        or_(JobRow.priority > row.priority,
            and_(JobRow.priority == row.priority, later_in_arrival)),
    ]  # fmt: skip
