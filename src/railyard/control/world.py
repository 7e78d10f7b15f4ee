"""The store as the lifecycle sees it: rows in, a `sched.lifecycle.StepInput` out.

Converting ten thousand pending rows on every step would starve the API, so pending jobs are
cached by id and ``updated_t_s`` (every write to a job row bumps it) and only new or changed
rows are read in full; run-time predictions are refreshed from recent completions at most
once a minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from railyard.control.convert import (
    SCHED_COLUMNS,
    to_job,
    to_node,
    to_queue,
    to_running,
    usage_from_rows,
)
from railyard.control.tables import (
    HOLDING_STATES,
    JobRow,
    JobState,
    NodeRow,
    QueueRow,
    UsageRow,
    User,
)
from railyard.sched import Job, RunningJob, SchedulerConfig
from railyard.sched.lifecycle import Exit, StepInput, predict_runtimes

HISTORY_JOBS = 2000  # completed jobs the run-time predictions look at
HISTORY_REFRESH_S = 60.0


@dataclass
class Seen:
    """What the writer needs to know of the rows the plan was made from."""

    reasons: dict[str, str] = field(default_factory=dict)  # pending job -> stored reason
    nominated: set[str] = field(default_factory=set)
    running: dict[str, RunningJob] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # started job -> stored state


class WorldReader:
    def __init__(self, scheduler: SchedulerConfig) -> None:
        self.scheduler = scheduler
        self._pending_cache: dict[str, tuple[float, Job]] = {}
        self._history: dict[tuple[str, str | None], float] = {}
        self._history_t_s: float | None = None

    def read(
        self,
        session: Session,
        now_t_s: float,
        exits: Sequence[Exit],
        last_accrual_t_s: float | None,
    ) -> tuple[StepInput, Seen]:
        users = {u.id: u.name for u in session.scalars(select(User))}
        nodes = [to_node(r) for r in session.scalars(select(NodeRow).order_by(NodeRow.name))]
        queues = [to_queue(r) for r in session.scalars(select(QueueRow))]
        live = session.execute(select(*SCHED_COLUMNS).where(JobRow.state.in_(HOLDING_STATES)))
        seen = Seen()
        for r in live:
            run = to_running(r, users.get(r.user_id, "?"))
            seen.running[run.id] = run
            seen.states[run.id] = r.state
        pending = self._pending(session, users, seen)
        usage = usage_from_rows(session.scalars(select(UsageRow)))
        wanted = {i for job in pending for d in job.dependencies for i in d.job_ids}
        given = StepInput(
            nodes=nodes,
            queues=queues,
            pending=pending,
            running=tuple(seen.running.values()),
            exits=tuple(exits),
            now_t_s=now_t_s,
            usage=usage,
            last_accrual_t_s=last_accrual_t_s,
            runtime_history_s=self._predictions(session, users, now_t_s),
            job_states=job_states(session, wanted) if wanted else {},
        )
        return given, seen

    def _pending(self, session: Session, users: dict[int, str], seen: Seen) -> list[Job]:
        keys = [
            (r[0], r[1], r[2])
            for r in session.execute(
                select(JobRow.id, JobRow.updated_t_s, JobRow.reason)
                .where(JobRow.state == JobState.PENDING.value)
                .order_by(JobRow.submit_t_s, JobRow.id)
            )
        ]
        cache = self._pending_cache
        stale = [job_id for job_id, updated, _ in keys if cache.get(job_id, (None,))[0] != updated]
        for chunk in range(0, len(stale), 500):
            ids = stale[chunk : chunk + 500]
            for r in session.execute(select(*SCHED_COLUMNS).where(JobRow.id.in_(ids))):
                cache[r.id] = (r.updated_t_s, to_job(r, users.get(r.user_id, "?")))
        self._pending_cache = {job_id: cache[job_id] for job_id, _, _ in keys}
        out = []
        for job_id, _, reason in keys:
            job = cache[job_id][1]
            seen.reasons[job_id] = reason
            if job.nominated:
                seen.nominated.add(job_id)
            out.append(job)
        return out

    def _predictions(
        self, session: Session, users: dict[int, str], now_t_s: float
    ) -> dict[tuple[str, str | None], float]:
        if not self.scheduler.estimate_from_history:
            return {}
        last = self._history_t_s
        if last is not None and 0 <= now_t_s - last < HISTORY_REFRESH_S:
            return self._history
        rows = session.execute(
            select(JobRow.queue, JobRow.user_id, JobRow.start_t_s, JobRow.end_t_s)
            .where(JobRow.state == JobState.COMPLETED.value, JobRow.restart_count == 0)
            .order_by(JobRow.end_t_s.desc())
            .limit(HISTORY_JOBS)
        ).all()
        done = [
            (queue, users.get(user_id, "?"), end - start)
            for queue, user_id, start, end in reversed(rows)
            if start is not None and end is not None
        ]
        self._history = predict_runtimes(done)
        self._history_t_s = now_t_s
        return self._history


def job_states(session: Session, ids: set[str]) -> dict[str, str]:
    """What dependencies read of the jobs they name: "pending", "running" or the end state;
    an array's number stands for all its tasks (pending while any waits, running while any
    runs, completed when all did, else the first end that was not)."""
    rows = session.execute(
        select(JobRow.id, JobRow.state, JobRow.array_parent).where(
            or_(JobRow.id.in_(ids), JobRow.array_parent.in_(ids))
        )
    )
    out: dict[str, str] = {}
    tasks: dict[str, list[str]] = {}
    for job_id, state, parent in rows:
        if job_id in ids:
            out[job_id] = _dependency_state(state)
        if parent in ids:
            tasks.setdefault(parent, []).append(_dependency_state(state))
    for parent, states in tasks.items():
        if parent in out:
            continue
        if "pending" in states:
            out[parent] = "pending"
        elif "running" in states:
            out[parent] = "running"
        else:
            bad = [s for s in states if s != "completed"]
            out[parent] = bad[0] if bad else "completed"
    return out


def _dependency_state(state: str) -> str:
    if state == JobState.PENDING.value:
        return "pending"
    return "running" if state in HOLDING_STATES else state
