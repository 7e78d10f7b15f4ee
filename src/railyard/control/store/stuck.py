"""Jobs past the deadline of a transient state (STARTING, CANCELLING, PREEMPTING).

The loop leaves those states itself within a step or two: a STARTING row gets its launch
handle in the step that wrote it, a cancel or a preemption ends when the executor reports the
exit. A row still there long after is stranded: its launch or its record failed, or the
process it waits for is gone without a report. The loop's sweep (`control.loop`) relaunches or
settles such rows; ``/healthz``, ``/metrics`` and the dashboard count the ones left.

One indexed query (``jobs.state``) per look, on the loop's clock, so the tests drive it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from railyard.control.store.tables import JobRow, JobState

TRANSIENT = (JobState.STARTING.value, JobState.CANCELLING.value, JobState.PREEMPTING.value)
IDS_SHOWN = 20  # ids named in /healthz's reason and the dashboard; the count is exact


@dataclass(frozen=True)
class Deadlines:
    """How long a row may stay in a transient state before it counts as stranded.

    ``starting_s`` after the step that wrote STARTING (its launch is recorded in that step);
    ``cancelling_s`` after the cancel (the executor's SIGTERM, then SIGKILL, takes seconds);
    ``preempting_s`` past the checkpoint deadline the preemption gave the job."""

    starting_s: float = 30.0
    cancelling_s: float = 60.0
    preempting_s: float = 60.0

    @classmethod
    def for_interval(cls, cycle_interval_s: float) -> Deadlines:
        """At least ten loop periods each: a slow step must not look stranded."""
        floor_s = 10 * cycle_interval_s
        base = cls()
        return cls(
            max(base.starting_s, floor_s),
            max(base.cancelling_s, floor_s),
            max(base.preempting_s, floor_s),
        )


@dataclass(frozen=True)
class Overdue:
    """One stranded row, as the sweep needs it."""

    job_id: str
    state: str
    restart_count: int


@dataclass(frozen=True)
class StuckCount:
    """How many rows are past their deadline, by state, and the first ids (oldest first)."""

    by_state: dict[str, int]
    ids: tuple[str, ...]

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    def line(self) -> str:
        """``3 jobs stuck past their deadline: 2 starting, 1 cancelling (ids 4, 9, 12)``"""
        states = ", ".join(f"{n} {state}" for state, n in sorted(self.by_state.items()) if n)
        more = ", ..." if self.total > len(self.ids) else ""
        noun = "job" if self.total == 1 else "jobs"
        ids = ", ".join(self.ids)
        return f"{self.total} {noun} stuck past their deadline: {states} (ids {ids}{more})"


def _past(deadlines: Deadlines, now_t_s: float) -> ColumnElement[bool]:
    since_preempt = func.coalesce(JobRow.preempt_deadline_t_s, JobRow.updated_t_s)
    return or_(
        and_(
            JobRow.state == JobState.STARTING.value,
            JobRow.updated_t_s < now_t_s - deadlines.starting_s,
        ),
        and_(
            JobRow.state == JobState.CANCELLING.value,
            JobRow.updated_t_s < now_t_s - deadlines.cancelling_s,
        ),
        and_(
            JobRow.state == JobState.PREEMPTING.value,
            since_preempt < now_t_s - deadlines.preempting_s,
        ),
    )


def overdue(
    session: Session, now_t_s: float, deadlines: Deadlines, *, limit: int = 500
) -> list[Overdue]:
    """Rows past their deadline, oldest first, at most ``limit`` (the rest: next sweep)."""
    rows = session.execute(
        select(JobRow.id, JobRow.state, JobRow.restart_count)
        .where(JobRow.state.in_(TRANSIENT), _past(deadlines, now_t_s))
        .order_by(JobRow.updated_t_s, JobRow.id)
        .limit(limit)
    ).all()
    return [Overdue(i, state, restarts) for i, state, restarts in rows]


def count_stuck(session: Session, now_t_s: float, deadlines: Deadlines) -> StuckCount:
    """Rows past their deadline by state, and the oldest few ids."""
    past = (JobRow.state.in_(TRANSIENT), _past(deadlines, now_t_s))
    by_state = Counter(
        {
            state: int(n)
            for state, n in session.execute(
                select(JobRow.state, func.count()).where(*past).group_by(JobRow.state)
            )
        }
    )
    ids: tuple[str, ...] = ()
    if by_state:
        ids = tuple(
            session.scalars(
                select(JobRow.id).where(*past).order_by(JobRow.updated_t_s).limit(IDS_SHOWN)
            )
        )
    return StuckCount({s: by_state.get(s, 0) for s in TRANSIENT}, ids)
