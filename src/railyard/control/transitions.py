"""Job state changes as compare-and-set on the row: ``UPDATE ... WHERE id AND state IN (...)``.

Two writers change a job's state: the API (cancel) and the loop (start, settle, stop). A
read-modify-write lets the later writer overwrite what it never saw (a cancel that read
``running`` turning a job the loop had just completed back into ``cancelling``, holding its
GPUs forever). Here a change names the states it expects to move from and applies only if the
row is still in one of them; the caller learns whether it applied and re-reads if not. Each
``UPDATE`` is atomic on both stores (SQLite takes the write lock; PostgreSQL re-checks the
``WHERE`` on the newest row version after waiting for its lock), so no interleaving loses a
change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from railyard.control.tables import JobRow, JobState

CHUNK = 500  # ids per statement: well under SQLite's and PostgreSQL's parameter limits


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
) -> list[str]:
    """:func:`transition` for many jobs; returns the ids it changed, in ``job_ids`` order."""
    states = [s.value for s in expected]
    changed: set[str] = set()
    for start in range(0, len(job_ids), CHUNK):
        ids = list(job_ids[start : start + CHUNK])
        stmt = (
            update(JobRow)
            .where(JobRow.id.in_(ids), JobRow.state.in_(states))
            .values(**values)
            .returning(JobRow.id)
            .execution_options(synchronize_session=False)
        )
        if attempt is not None:
            stmt = stmt.where(JobRow.restart_count == attempt)
        changed.update(session.scalars(stmt))
    for job_id in job_ids:  # objects loaded earlier in this session may be stale now
        loaded = session.identity_map.get(session.identity_key(JobRow, job_id))
        if loaded is not None:
            session.expire(loaded)
    return [i for i in job_ids if i in changed]
