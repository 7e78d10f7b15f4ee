"""The dashboard's job pages: a page of job lines, the filter choices, one job's detail with
its history, and a rank's log. A plain user sees only their own jobs (another's answers as a
missing one: NotFound for a page, Forbidden for a log, the same for both); an admin sees
all."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.errors import Forbidden, Invalid, NotFound
from railyard.control.store.tables import EventRow, JobRow, JobState, QueueRow, User
from railyard.control.usecases import joblookup, logs
from railyard.control.usecases.why import Why, why_pending

STATES = [s.value for s in JobState]
HISTORY_EVENTS = 100  # the newest events a job page shows


@dataclass(frozen=True)
class JobLine:
    """One row of the jobs table."""

    id: str
    name: str
    user: str
    queue: str
    state: str
    gpus: int
    placement: dict[str, list[int]]
    reason: str


@dataclass(frozen=True)
class Event:
    t_s: float
    kind: str
    message: str


@dataclass(frozen=True)
class JobDetail:
    """What a job page shows: the job's facts, its history, and the actions it allows."""

    line: JobLine
    unix_user: str
    flavor: str
    workers: int
    gpus_per_worker: int
    restart_count: int
    max_restarts: int
    run_s: float | None  # None: never started
    walltime_s: float | None
    command: list[str] | None  # None: a batch script
    env_names: list[str]  # names only: the values may be secrets
    hold: str | None
    ranks: int  # processes whose logs can be read
    events: list[Event]  # oldest first, the newest HISTORY_EVENTS
    interactive: str = ""  # pipes or pty (railyard run), app (railyard jupyter)
    mine: bool = False  # the viewer's own: only its owner may open an app or a terminal
    why: Why | None = None  # a pending job's wait, in numbers

    @property
    def finished(self) -> bool:
        return JobState(self.line.state).finished

    @property
    def pending(self) -> bool:
        return self.line.state == JobState.PENDING.value


@dataclass(frozen=True)
class JobFilters:
    states: list[str]
    queues: list[str]
    users: list[str]  # an admin's choice only; empty for a plain user


@dataclass(frozen=True)
class LogPiece:
    text: str
    offset: int
    finished: bool  # the job ended and nothing more was read: stop following


def _line(row: JobRow, user: str) -> JobLine:
    return JobLine(row.id, row.name, user, row.queue, row.state,
                   row.workers * row.gpus_per_worker, dict(row.placement or {}),
                   row.reason)  # fmt: skip


def job_filters(session: Session, actor: User) -> JobFilters:
    queues = sorted(session.scalars(select(QueueRow.name)))
    users = sorted(session.scalars(select(User.name))) if actor.is_admin else []
    return JobFilters(STATES, queues, users)


def _visible(session: Session, actor: User, job_id: str) -> JobRow:
    """A job the actor may see; another user's is "no job" too, as the API answers, so that
    probing ids (``4_0``, ``4_1``...) tells nothing of other users' jobs and arrays."""
    row = session.get(JobRow, job_id)
    if row is None or (not actor.is_admin and row.user_id != actor.id):
        raise NotFound(f"no job {job_id}")
    return row


def job_detail(session: Session, actor: User, job_id: str, now_t_s: float) -> JobDetail:
    row = _visible(session, actor, job_id)
    owner = session.get(User, row.user_id)
    run_s = None if row.start_t_s is None else (row.end_t_s or now_t_s) - row.start_t_s
    events = session.scalars(
        select(EventRow).where(EventRow.job_id == row.id).order_by(EventRow.t_s, EventRow.id)
    ).all()
    return JobDetail(
        line=_line(row, owner.name if owner else "?"), unix_user=row.unix_user,
        flavor=row.flavor, workers=row.workers, gpus_per_worker=row.gpus_per_worker,
        restart_count=row.restart_count, max_restarts=row.max_restarts, run_s=run_s,
        walltime_s=row.walltime_s, command=None if row.script else list(row.command),
        env_names=sorted(row.env), hold=row.hold,
        ranks=max(1, len((row.handle or {}).get("workers") or [])),
        events=[Event(e.t_s, e.kind, e.message) for e in events[-HISTORY_EVENTS:]],
        interactive=row.terminal, mine=row.user_id == actor.id,
        why=why_pending(session, row, owner.name if owner else "?"),
    )  # fmt: skip


def job_events(session: Session, actor: User, job_id: str) -> list[Event]:
    """A job's history (the newest HISTORY_EVENTS, oldest first): its owner's or an admin's
    (another user's is not found, as `joblookup.get_job` says)."""
    row, _ = joblookup.get_job(session, actor, job_id)
    events = session.scalars(
        select(EventRow).where(EventRow.job_id == row.id)
        .order_by(EventRow.t_s.desc(), EventRow.id.desc()).limit(HISTORY_EVENTS)
    ).all()  # fmt: skip
    return [Event(e.t_s, e.kind, e.message) for e in reversed(events)]


SESSION_STATES = (JobState.PENDING.value, JobState.STARTING.value, JobState.RUNNING.value)


def sessions_of(session: Session, actor: User, limit: int = 50) -> list[tuple[JobLine, str]]:
    """The actor's own interactive jobs not yet ended, newest first, with their kind
    (pipes, pty, app): the dashboard's "Your sessions". Found through the state index (the
    jobs not ended, a bounded set), not the user's (every job they ever ran: ``+ 0`` keeps
    the planner off it; 30 ms -> 3 ms for a user with 110,000 jobs on SQLite)."""
    rows = session.scalars(
        select(JobRow)
        .where(JobRow.user_id + 0 == actor.id, JobRow.terminal != "",
               JobRow.state.in_(SESSION_STATES))
        .order_by(JobRow.submit_t_s.desc())
        .limit(limit)
    )  # fmt: skip
    return [(_line(row, actor.name), row.terminal) for row in rows]


def read_job_log(
    session: Session,
    actor: User,
    job_id: str,
    rank: int,
    offset: int,
    spool_dir: Path,
    remote: logs.RemoteLog | None,
) -> LogPiece:
    """Rank `rank`'s log from `offset`. Forbidden for a job the actor may not see (a missing
    one too: ids don't leak) or a file that must not be shown; Invalid for a bad rank."""
    row = session.get(JobRow, job_id)
    if row is None or (not actor.is_admin and row.user_id != actor.id):
        raise Forbidden("not your job")
    paths = logs.log_paths(row, spool_dir)
    if not 0 <= rank < len(paths) or offset < 0:
        raise Invalid("rank", "no such rank")
    text, new = logs.read_rank_log(row, rank, paths[rank], offset, spool_dir, remote)
    return LogPiece(text, new, JobState(row.state).finished and new == offset)
