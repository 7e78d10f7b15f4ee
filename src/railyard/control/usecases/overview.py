"""The cluster overview: GPUs by flavor, pending jobs by reason, and the loop's state, each as
its viewer may see it. "Pending by reason" is computed here once, for the dashboard and for
``/metrics`` alike, so the two never count a reason differently."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railyard.control.store.tables import HOLDING_STATES, JobRow, JobState, NodeRow, User
from railyard.control.usecases.loopstatus import LoopHealth, loop_status
from railyard.control.usecases.queues import list_queues

_REASON_WORD = re.compile(r"[A-Za-z]+")
STUCK_LINE = "stuck past their deadline"  # the loop's line naming stuck jobs' ids


@dataclass(frozen=True)
class FlavorGpus:
    flavor: str
    total: int
    in_use: int
    draining: int  # on draining or drained nodes, not in use
    down: int

    @property
    def free(self) -> int:
        return max(0, self.total - self.in_use - self.draining - self.down)


@dataclass(frozen=True)
class LoopReport:
    """The scheduler loop as /healthz judges it, in lines this viewer may read."""

    ok: bool
    lines: tuple[str, ...]


def gpus_by_flavor(session: Session) -> list[FlavorGpus]:
    """Per flavor: all GPUs, those held by jobs, and the idle ones on draining or down nodes
    (counts only: whose jobs hold them is not said, so every viewer may see this)."""
    nodes = session.execute(select(NodeRow.name, NodeRow.flavor, NodeRow.gpus, NodeRow.state))
    flavor_of, state_of, gpus_of = {}, {}, {}
    total: Counter[str] = Counter()
    for name, flavor, gpus, state in nodes:
        flavor_of[name], state_of[name], gpus_of[name] = flavor, state, gpus
        total[flavor] += gpus
    used: Counter[str] = Counter()
    used_on: Counter[str] = Counter()
    for (placement,) in session.execute(
        select(JobRow.placement).where(JobRow.state.in_(HOLDING_STATES))
    ):
        for node, held in (placement or {}).items():
            used[flavor_of.get(node, "?")] += len(held)
            used_on[node] += len(held)
    draining: Counter[str] = Counter()
    down: Counter[str] = Counter()
    for name, state in state_of.items():
        idle = gpus_of[name] - used_on[name]
        if state in ("draining", "drained"):
            draining[flavor_of[name]] += idle
        elif state == "down":
            down[flavor_of[name]] += idle
    return [FlavorGpus(f, total[f], used[f], draining[f], down[f]) for f in sorted(total)]


def reason_label(reason: str | None) -> str:
    """The reason's leading word ("Resources", "Priority", "QOSGrpGRES"...), so a detail in
    the stored text ("LaunchFailed after 3 tries: ...") never makes a label value or a row of
    its own; "None" for a job not yet looked at (Slurm's word for it)."""
    found = _REASON_WORD.match((reason or "").strip())
    return found.group(0)[:64] if found else "None"


def pending_counts(session: Session, user_id: int | None = None) -> dict[tuple[str, str], int]:
    """Pending jobs (of `user_id`, or everyone's) by (queue, reason label), one GROUP BY."""
    stmt = select(JobRow.queue, JobRow.reason, func.count()).where(
        JobRow.state == JobState.PENDING.value
    )
    if user_id is not None:
        stmt = stmt.where(JobRow.user_id == user_id)
    counts: Counter[tuple[str, str]] = Counter()
    for queue, reason, count in session.execute(stmt.group_by(JobRow.queue, JobRow.reason)):
        counts[queue, reason_label(reason)] += int(count)
    return dict(counts)


def pending_by_reason(session: Session, actor: User) -> list[tuple[str, int]]:
    """The actor's pending jobs (an admin: everyone's) by reason, most first."""
    counts: Counter[str] = Counter()
    for (_, label), count in pending_counts(session, None if actor.is_admin else actor.id).items():
        counts[label] += count
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def loop_report(
    session: Session, health: LoopHealth | None, actor: User, now_t_s: float
) -> LoopReport | None:
    """The loop's problems; stuck jobs' ids for an admin only (a user never sees another
    user's job named: they get counts by state). None where the app runs no loop."""
    if health is None:
        return None
    status = loop_status(session, health, now_t_s)
    if status.ok or actor.is_admin:
        return LoopReport(status.ok, status.problems)
    lines = [p for p in status.problems if STUCK_LINE not in p]
    by_state = sorted(status.stuck.by_state.items())
    stuck = ", ".join(f"{n} {state}" for state, n in by_state if n)
    lines += [f"scheduler loop: {status.stuck.total} jobs stuck ({stuck})"] if stuck else []
    return LoopReport(False, tuple(lines))


@dataclass(frozen=True)
class InUse:
    """GPUs held now, by queue and by user, most first. A plain user sees their own line and
    the queues they may see; everyone else is summed into one line of each."""

    by_queue: list[tuple[str, int]]
    by_user: list[tuple[str, int]]


OTHERS = "(others)"


def gpus_in_use_by(session: Session, actor: User) -> InUse:
    visible = None if actor.is_admin else {q.name for q in list_queues(session, actor)}
    queues: Counter[str] = Counter()
    users: Counter[str] = Counter()
    rows = session.execute(
        select(JobRow.queue, User.name, JobRow.workers * JobRow.gpus_per_worker)
        .join(User, User.id == JobRow.user_id)
        .where(JobRow.state.in_(HOLDING_STATES))
    )
    for queue, user, gpus in rows:
        queues[queue if visible is None or queue in visible else OTHERS] += gpus
        users[user if actor.is_admin or user == actor.name else OTHERS] += gpus
    return InUse(_most_first(queues), _most_first(users))


def _most_first(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (kv[0] == OTHERS, -kv[1], kv[0]))


@dataclass(frozen=True)
class HeadJob:
    """A pending job at the head of the loop's order: what it asks and why it waits; its id
    only where the viewer may see the job (their own, or an admin)."""

    id: str | None
    queue: str
    flavor: str
    gpus: int
    reason: str  # its label (`reason_label`): the detail is on the job's page


HEAD_JOBS = 5


def head_jobs(session: Session, actor: User, limit: int = HEAD_JOBS) -> list[HeadJob]:
    """The first pending, unheld jobs in the loop's order (priority, then arrival): what the
    overview shows beside free GPUs, so "4 GPUs free beside 10,016 pending" says why those
    jobs do not take them. A top-N of the pending rows (the state index), never every job."""
    rows = session.execute(
        select(JobRow.id, JobRow.user_id, JobRow.queue, JobRow.flavor,
               JobRow.workers * JobRow.gpus_per_worker, JobRow.reason)
        .where(JobRow.state == JobState.PENDING.value, JobRow.hold.is_(None))
        .order_by(JobRow.priority.desc(), JobRow.submit_t_s, JobRow.number, JobRow.array_index)
        .limit(limit)
    )  # fmt: skip
    return [
        HeadJob(job_id if actor.is_admin or user_id == actor.id else None, queue, flavor,
                int(gpus), reason_label(reason))
        for job_id, user_id, queue, flavor, gpus, reason in rows
    ]  # fmt: skip
