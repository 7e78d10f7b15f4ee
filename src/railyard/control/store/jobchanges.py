"""Which job rows changed since a reader last looked: ``jobs.change_seq`` and a mark.

The store sets ``change_seq`` on every insert and every update of a job row (triggers,
migration 0028; a bulk statement may number its rows itself, :func:`numbered`), except an
update of ``reason`` alone: that is what the scheduler loop says of a pending row each step,
not a change to the job. The number grows as writes commit:

- On SQLite one writer runs at a time, and the number is ``counters['job_changes']``,
  bumped by each row it stamps, in the writer's transaction. A reader that sees the counter
  at ``n`` sees every row stamped up to ``n``; a row committed later is stamped above ``n``.
- On PostgreSQL it is the writing transaction's id. Every transaction below the oldest one
  still running in a snapshot (its ``xmin``) has ended, so any row a reader could not see
  then was written by a transaction at or above that ``xmin``.

So a reader takes :func:`change_mark` *before* it reads, and reads next time the rows whose
``change_seq`` is at least that mark (:func:`changed_since`): nothing written since its
first read is missed, whatever commits in between and in whatever order. Some rows are read
twice (on PostgreSQL, those of transactions still running at the mark); a reader compares
them. A transaction left open on the PostgreSQL server, in any of its databases, holds every
mark back: each read then returns every row changed since it began (still correct; the
server's ``idle_in_transaction_session_timeout`` bounds it). Job rows are never deleted, so
"changed" covers everything a reader must learn.

A read is good only if the reader's own transaction commits: it saw that transaction's
writes, and a rollback takes them back without a new number (on SQLite it also gives the
numbers back to the next writer), so a reader whose step failed reads everything again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Row, func, select, update
from sqlalchemy.orm import Session

from railyard.control.store.tables import Counter, JobRow

COUNTER = "job_changes"  # SQLite's counter row (migration 0028)
_SQLITE_MARK = f"SELECT value FROM counters WHERE name = '{COUNTER}'"
_POSTGRESQL_MARK = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"


def change_mark(session: Session) -> int | None:
    """The mark to read changes from next time, taken before this read; None if the store
    keeps no such number (a counters table emptied by hand): then read everything."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        return int(connection.exec_driver_sql(_POSTGRESQL_MARK).scalar_one())
    value = connection.exec_driver_sql(_SQLITE_MARK).scalar()
    return None if value is None else int(value) + 1


def changed_since(session: Session, mark: int, columns: Sequence[Any]) -> Sequence[Row[Any]]:
    """``columns`` of every job row written since ``mark`` was taken, in any state (a row
    that left a state is a change too); through the index on ``change_seq``."""
    stmt = select(*columns).where(JobRow.change_seq >= mark)
    return session.connection().execute(stmt).all()


def numbered(session: Session, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` of an UPDATE of many job rows, with their change number on SQLite: the
    counter bumped once and every row given the new value, where the trigger would bump it
    and write each row a second time (a third of a 10,000-task array's cancel). PostgreSQL's
    trigger numbers the rows as they are written: nothing to add there."""
    if session.get_bind().dialect.name != "sqlite":
        return dict(values)
    session.execute(update(Counter).where(Counter.name == COUNTER).values(value=Counter.value + 1))
    number = select(Counter.value).where(Counter.name == COUNTER).scalar_subquery()
    return {**values, "change_seq": func.coalesce(number, 0)}  # 0: no counter, read all
