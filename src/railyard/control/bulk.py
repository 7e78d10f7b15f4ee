"""Many jobs in a few statements: an array's (or a batch's) rows and their audit events.

A 10,000-task array stored through the ORM built 20,000 instrumented objects and flushed
them one by one, holding the store's write lock for tens of seconds. Here rows are plain
dicts sent with one driver-level ``executemany`` per table: the statement is compiled once
and each row is a tuple (JSON columns serialized as SQLAlchemy's ``JSON`` type does), so
SQLAlchemy's per-row parameter processing (most of the time, measured with cProfile) is
skipped. What the API answers is built from those same dicts (:class:`JobView`), never
re-read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import cache
from types import SimpleNamespace
from typing import Any

from sqlalchemy import JSON, Table, bindparam, insert
from sqlalchemy.orm import Session

from railyard.control.tables import EventRow, JobRow


class JobView(SimpleNamespace):
    """A stored job's columns by name, like a ``JobRow`` (what ``JobOut.from_row`` reads)."""


@cache
def _defaults() -> dict[str, Any]:
    """Every ``jobs`` column's value when a submit does not set it (the table's defaults)."""
    out: dict[str, Any] = {}
    for column in JobRow.__table__.columns:
        default = column.default
        arg = getattr(default, "arg", None) if default is not None else None
        out[column.key] = arg(None) if callable(arg) else arg
    return out


def _executemany(
    session: Session, table: Table, common: dict[str, Any], rows: Sequence[dict[str, Any]]
) -> None:
    """``INSERT`` one row per item of ``rows`` (all with the same keys), each with the values
    of ``common`` too, in one ``executemany`` through the driver. Columns named nowhere get
    the table's Python-side defaults (which the driver would not apply)."""
    if not rows:
        return
    defaults = _defaults() if table is JobRow.__table__ else {}
    varying = list(rows[0])
    fixed = dict(common)
    for column in table.columns:
        key = column.key
        if key not in fixed and key not in varying and defaults.get(key) is not None:
            fixed[key] = defaults[key]
    as_json = {c.key for c in table.columns if isinstance(c.type, JSON)}
    for key in as_json & fixed.keys():
        fixed[key] = None if fixed[key] is None else json.dumps(fixed[key])
    keys = [*fixed, *varying]
    connection = session.connection()
    compiled = (
        insert(table).values({k: bindparam(k) for k in keys}).compile(dialect=connection.dialect)
    )
    order = list(compiled.positiontup or []) if compiled.positional else keys
    slots = [(n, k) for n, k in enumerate(order) if k in varying]
    template = [fixed.get(k) for k in order]
    json_varying = as_json.intersection(varying)
    params: list[Any] = []
    for row in rows:
        values = template.copy()
        for n, key in slots:
            v = row[key]
            values[n] = json.dumps(v) if key in json_varying and v is not None else v
        params.append(
            tuple(values) if compiled.positional else dict(zip(order, values, strict=True))
        )
    connection.exec_driver_sql(compiled.string, params)


def insert_jobs(
    session: Session, common: dict[str, Any], rows: Sequence[dict[str, Any]]
) -> list[JobView]:
    """Store one job per item of ``rows`` (its own values), each with ``common``'s values."""
    _executemany(session, JobRow.__table__, common, rows)  # type: ignore[arg-type]
    base = {**_defaults(), **common}
    return [JobView(**{**base, **row}) for row in rows]


def insert_events(
    session: Session, now_t_s: float, kind: str, message: str, job_ids: Iterable[str]
) -> None:
    """One audit event per job (``effects.record`` for many), in one ``executemany``."""
    common = {"t_s": now_t_s, "kind": kind, "message": message}
    events = [{"job_id": i} for i in job_ids]
    _executemany(session, EventRow.__table__, common, events)  # type: ignore[arg-type]
