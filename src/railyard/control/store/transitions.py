"""Job state changes as compare-and-set on the row: ``UPDATE ... WHERE id AND state IN (...)``.

Two writers change a job's state: the API (cancel) and the loop (start, settle, stop). A
read-modify-write lets the later writer overwrite what it never saw (a cancel that read
``running`` turning a job the loop had just completed back into ``cancelling``, holding its
GPUs forever). Here a change names the states it expects to move from and applies only if the
row is still in one of them; the caller learns whether it applied and re-reads if not. Each
``UPDATE`` is atomic on both stores (SQLite takes the write lock; PostgreSQL re-checks the
``WHERE`` on the newest row version after waiting for its lock), so no interleaving loses a
change.

Two writers that each change many rows can still lock them in opposite orders; PostgreSQL then
aborts one with a deadlock (40P01). A caller that changes many rows on a client's behalf (a
cancel of a 10,000-task array racing the loop's completions) passes ``retry_conflicts``: each
statement runs in a savepoint and is re-run after such an abort, so the client never sees a
503 for what is only a lost race.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import ColumnElement, Executable, Update, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from railyard.control.store.jobchanges import numbered
from railyard.control.store.tables import JobRow, JobState

CHUNK = 500  # ids per statement: well under SQLite's and PostgreSQL's parameter limits
RETRIES = 5  # re-runs of a statement aborted by a deadlock or a serialization failure
# PostgreSQL's SQLSTATEs for an abort that a re-run may not meet again (Appendix A of its manual)
_LOST_RACE = {"40P01", "40001"}


def changed_rows(
    session: Session, stmt: Executable, params: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """Rows an UPDATE changed (SQLAlchemy types `execute` as returning a plain Result); with
    ``params``, a Core statement run once per parameter set (executemany: both drivers count
    the rows of every set)."""
    if params is not None:
        many = cast(CursorResult[Any], session.connection().execute(stmt, list(params)))
        return many.rowcount
    result = cast(CursorResult[Any], session.execute(stmt))
    return result.rowcount


def transition(
    session: Session,
    job_id: str,
    expected: Iterable[JobState],
    values: Mapping[str, Any],
    *,
    attempt: int | None = None,
) -> bool:
    """Apply ``values`` to job ``job_id`` if its state is one of ``expected`` (and, given
    ``attempt``, its ``restart_count`` is that attempt); True when it applied."""
    return bool(transition_many(session, [job_id], expected, values, attempt=attempt))


def transition_many(
    session: Session,
    job_ids: Sequence[str],
    expected: Iterable[JobState],
    values: Mapping[str, Any],
    *,
    attempt: int | None = None,
    retry_conflicts: bool = False,
) -> list[str]:
    """:func:`transition` for many jobs; returns the ids it changed, in ``job_ids`` order.

    ``retry_conflicts``: re-run a statement that lost a deadlock (module docstring)."""
    states = [s.value for s in expected]
    changed: set[str] = set()
    ordered = sorted(job_ids)  # one lock order for every caller that passes many ids
    for start in range(0, len(ordered), CHUNK):
        ids = ordered[start : start + CHUNK]
        stmt = (
            update(JobRow)
            .where(JobRow.id.in_(ids), JobRow.state.in_(states))
            .values(**values)
            .returning(JobRow.id)
            .execution_options(synchronize_session=False)
        )
        if attempt is not None:
            stmt = stmt.where(JobRow.restart_count == attempt)
        changed.update(_run(session, stmt) if retry_conflicts else session.scalars(stmt))
    for job_id in job_ids:  # objects loaded earlier in this session may be stale now
        loaded = session.identity_map.get(session.identity_key(JobRow, job_id))
        if loaded is not None:
            session.expire(loaded)
    return [i for i in job_ids if i in changed]


def transition_where(
    session: Session,
    where: Sequence[ColumnElement[bool]],
    expected: Iterable[JobState],
    values: Mapping[str, Any],
    *,
    retry_conflicts: bool = False,
) -> list[str]:
    """:func:`transition` for every job matching ``where`` (an array's tasks), in one
    statement: no id list to send and no row read first. Returns the ids it changed."""
    stmt = (
        update(JobRow)
        .where(*where, JobRow.state.in_([s.value for s in expected]))
        .values(**numbered(session, values))
        .returning(JobRow.id)
        .execution_options(synchronize_session=False)
    )
    return _run(session, stmt) if retry_conflicts else list(session.scalars(stmt))


def _run(session: Session, stmt: Update) -> list[str]:
    """``stmt`` in a savepoint, re-run when PostgreSQL aborted it to break a deadlock."""
    for attempt in range(RETRIES + 1):
        try:
            with session.begin_nested():
                return list(session.scalars(stmt))
        except OperationalError as exc:
            orig = exc.orig
            code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
            if code not in _LOST_RACE or attempt == RETRIES:
                raise
            time.sleep(0.02 * 2**attempt)  # let the winner commit
    raise AssertionError("unreachable")
