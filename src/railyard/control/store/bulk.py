"""Many jobs in a few statements: an array's (or a batch's) rows, their audit events, an
array's cancel, and the reads a batch makes once.

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
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from types import SimpleNamespace
from typing import Any, TypeVar, cast, overload

from sqlalchemy import JSON, Dialect, Row, Table, bindparam, insert, literal, select, text
from sqlalchemy.orm import Session

from railyard.control.errors import NotFound
from railyard.control.store.effects import request_wake
from railyard.control.store.sharedreads import shared_of
from railyard.control.store.tables import ACTIVE_STATES, EventRow, JobRow, JobState, QueueRow, User
from railyard.control.store.transitions import transition_where

_T = TypeVar("_T")


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


@lru_cache(maxsize=64)
def _insert_sql(
    table: Table, dialect: Dialect, keys: tuple[str, ...]
) -> tuple[str, bool, list[str]]:
    """The ``INSERT`` of ``keys`` compiled once per table, dialect and key order: compiling
    took 4 ms, most of a single submit's time (cProfile)."""
    compiled = insert(table).values({k: bindparam(k) for k in keys}).compile(dialect=dialect)
    order = list(compiled.positiontup or []) if compiled.positional else list(keys)
    return compiled.string, bool(compiled.positional), order


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
    keys = (*fixed, *varying)
    connection = session.connection()
    sql, positional, order = _insert_sql(table, connection.dialect, keys)
    slots = [(n, k) for n, k in enumerate(order) if k in varying]
    template = [fixed.get(k) for k in order]
    json_varying = as_json.intersection(varying)
    dumped: dict[int, str] = {}  # by object: a batch's rows share one env dict
    params: list[Any] = []
    for row in rows:
        values = template.copy()
        for n, key in slots:
            v = row[key]
            if key in json_varying and v is not None:
                if id(v) not in dumped:
                    dumped[id(v)] = json.dumps(v)
                v = dumped[id(v)]
            values[n] = v
        params.append(tuple(values) if positional else dict(zip(order, values, strict=True)))
    connection.exec_driver_sql(sql, params)


def insert_jobs(
    session: Session, common: dict[str, Any], rows: Sequence[dict[str, Any]]
) -> StoredViews:
    """Store one job per item of ``rows`` (its own values), each with ``common``'s values.

    Rows that vary only in :data:`COPY_KEYS` (an array's tasks; a batch of alike jobs) go
    in as their first row, then one ``INSERT ... SELECT`` that copies it once per other row:
    the store expands them from a few short lists, as Slurm expands an array's one record,
    instead of taking 10,000 rows of 50 columns from the driver (PostgreSQL's pipeline runs
    one statement per row: 150 ms of a batch of 1,000's 250 ms)."""
    table: Table = JobRow.__table__  # type: ignore[assignment]
    if len(rows) > 1 and set(rows[0]) <= set(COPY_KEYS):
        _executemany(session, table, common, rows[:1])
        _copy_first(session, rows[0]["id"], rows[1:])
    else:
        _executemany(session, table, common, rows)
    return StoredViews({**_defaults(), **common}, rows)


class StoredViews(Sequence[JobView]):
    """The stored rows' views, each built when it is read: a submit's answer reads the
    first (10,000 views of 50 columns took 94 ms of an array's submit)."""

    def __init__(self, base: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
        self._base, self._rows = base, rows

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def base(self) -> dict[str, Any]:
        """The values every row shares (one object for all the rows of one insert)."""
        return self._base

    def own(self, index: int) -> dict[str, Any]:
        """Row ``index``'s own values, without building its view."""
        return self._rows[index]

    def single(self, index: int) -> StoredViews:
        """Row ``index`` alone, sharing this insert's base: a batch's job, still unbuilt."""
        return StoredViews(self._base, self._rows[index : index + 1])

    @overload
    def __getitem__(self, index: int) -> JobView: ...
    @overload
    def __getitem__(self, index: slice) -> list[JobView]: ...
    def __getitem__(self, index: int | slice) -> JobView | list[JobView]:
        if isinstance(index, slice):
            return [JobView(**{**self._base, **row}) for row in self._rows[index]]
        return JobView(**{**self._base, **self._rows[index]})


COPY_KEYS = {"id": "text", "task_number": "integer", "command": "json",
             "array_index": "integer", "number": "integer"}  # fmt: skip
"""What a row copied by :func:`_copy_first` may have of its own (a batch's jobs: a number
each too), with its PostgreSQL type."""


def _copy_first(session: Session, first_id: str, rows: Sequence[dict[str, Any]]) -> None:
    """``INSERT INTO jobs SELECT`` the row ``first_id`` once per row, with the row's own
    values (its keys, all among :data:`COPY_KEYS`), read by the store from one JSON list
    (``json_array_elements`` on PostgreSQL, ``json_each`` on SQLite): one ``json.dumps``
    here, where psycopg's dumping of one array per key took 180 ms of a 10,000-task array."""
    connection = session.connection()
    dialect = connection.dialect
    quote = dialect.identifier_preparer.quote
    columns = [c.name for c in JobRow.__table__.columns]
    keys = list(rows[0])
    if dialect.name == "postgresql":
        taken = {
            k: f"(e.v->{n})" if COPY_KEYS[k] == "json" else f"CAST(e.v->>{n} AS {COPY_KEYS[k]})"
            for n, k in enumerate(keys)
        }
        source = "json_array_elements(CAST(%(rows)s AS json)) AS e(v)"
        listed = json.dumps([[r[k] for k in keys] for r in rows])
        params: Any = {"rows": listed, "first": first_id}
        first = "%(first)s"
    else:  # json_extract gives a nested list back as its text: the column's own form
        picks = ", ".join(f"json_extract(value, '$[{n}]') AS {k}" for n, k in enumerate(keys))
        source = f"(SELECT {picks} FROM json_each(?)) AS t"
        taken = {k: f"t.{k}" for k in keys}
        listed = json.dumps(
            [[json.dumps(r[k]) if COPY_KEYS[k] == "json" else r[k] for k in keys] for r in rows]
        )
        params = (listed, first_id)
        first = "?"
    picked = ", ".join(taken.get(c, f"f.{quote(c)}") for c in columns)
    sql = (
        f"INSERT INTO jobs ({', '.join(quote(c) for c in columns)}) "
        f"SELECT {picked} FROM jobs AS f, {source} WHERE f.id = {first}"
    )
    connection.exec_driver_sql(sql, params)


def insert_events(
    session: Session, now_t_s: float, kind: str, events: Sequence[dict[str, Any]]
) -> None:
    """Audit events (``effects.record`` for many), each ``{"job_id", "message"}``, in one
    ``executemany``."""
    common = {"t_s": now_t_s, "kind": kind}
    _executemany(session, EventRow.__table__, common, events)  # type: ignore[arg-type]


_SUBMITTED_EVENTS = text(
    "INSERT INTO events (t_s, kind, message, job_id) "
    "SELECT :t_s, 'submitted', :who || queue || ': ' || CAST(workers * gpus_per_worker AS "
    "VARCHAR) || ' GPUs', id FROM jobs WHERE number >= :first AND number < :end "
    "ORDER BY number, array_index"
)  # built once: building it per submit was a fifth of a group commit's CPU (cProfile)


def submitted_events(session: Session, user: str, first: int, end: int, now_t_s: float) -> None:
    """The ``submitted`` event of every job numbered ``first`` to ``end - 1`` (one submit's,
    reserved together), written by the store from the rows just inserted: one ``INSERT ...
    SELECT``, no row sent from here."""
    params = {"t_s": now_t_s, "who": f"{user} -> ", "first": first, "end": end}
    session.connection().execute(_SUBMITTED_EVENTS, params)


def once(session: Session, key: str, read: Callable[[], _T]) -> _T:
    """``read()`` once per transaction: a batch of 1,000 submissions reads the queues and
    nodes once, not 1,000 times (they cannot change under a write transaction that holds
    SQLite's lock, and a batch is one decision on PostgreSQL too). A transaction attached to
    :class:`~railyard.control.store.sharedreads.SharedReads` (single submits) shares them
    with the transactions before it while the configuration is unchanged, so ``read`` may
    read only the tables whose changes bump it (queues, queue members, nodes), and its value
    is never changed by its callers."""
    shared = shared_of(session)
    if shared is not None:
        if key not in shared:
            shared[key] = read()
        return cast(_T, shared[key])
    memo = session.info.get("submit_reads")
    if memo is None or memo[0] is not session.get_transaction():
        memo = session.info["submit_reads"] = (session.get_transaction(), {})
    cache: dict[str, Any] = memo[1]
    if key not in cache:
        cache[key] = read()
    return cast(_T, cache[key])


def queue_settings(session: Session, name: str) -> Row[Any] | None:
    """Queue ``name``'s columns as plain values, read once (``once``): never the ORM row,
    which a rolled-back transaction would expire under the next one that shares it."""

    def read() -> Row[Any] | None:
        table = QueueRow.__table__
        return session.execute(select(table).where(table.c.name == name)).first()

    return once(session, f"queue:{name}", read)


def cancel_array(
    session: Session,
    actor: User,
    parent: str,
    now_t_s: float,
    ended_values: dict[str, Any],
    stopping_values: dict[str, Any],
    started: Sequence[JobState],
) -> list[tuple[Any, str]]:
    """Every task of array ``parent`` the actor may cancel: one ``UPDATE ... WHERE
    array_parent AND state IN (...)`` per target state (no ids read first, no row loaded).

    Answers as squeue shows an array: one record for the array (id ``parent``; a task this
    cancel ended, else its first task), then each task still active (being stopped), read
    in one query of plain rows: a handful, never the 10,000 the array may hold."""
    where = [JobRow.array_parent == parent]
    if not actor.is_admin:
        where.append(JobRow.user_id == actor.id)
    ended = transition_where(session, where, [JobState.PENDING], ended_values, retry_conflicts=True)
    stopping = transition_where(session, where, started, stopping_values, retry_conflicts=True)
    columns = (*JobRow.__table__.columns, User.name.label("user_name"))
    base = select(*columns).join(User, JobRow.user_id == User.id).where(*where)
    one = base.where(JobRow.id == ended[0]) if ended else base.order_by(JobRow.array_index)
    head = session.execute(one.limit(1)).first()
    if head is None:
        raise NotFound(f"no job {parent!r}")
    array = JobView(**{**head._asdict(), "id": parent, "array_index": None, "task_number": None})
    active = base.where(JobRow.state.in_(ACTIVE_STATES)).order_by(JobRow.array_index)
    targets = [(array, head.user_name)] + [(r, r.user_name) for r in session.execute(active)]
    if ended:  # 10,000 events written by the store from the rows this cancel just ended
        line = literal(f"{actor.name}: -> {JobState.CANCELLED.value}")
        rows = (
            select(literal(now_t_s), literal("cancel"), line, JobRow.id)
            .where(*where, *(getattr(JobRow, k) == v for k, v in ended_values.items()))
            .order_by(JobRow.array_index)
        )
        session.execute(insert(EventRow).from_select(["t_s", "kind", "message", "job_id"], rows))
    cancelled(session, actor, now_t_s, [], stopping, wake=bool(ended))
    return targets


def cancelled(
    session: Session,
    actor: User,
    now_t_s: float,
    ended: list[str],
    stopping: list[str],
    *,
    wake: bool = False,
) -> None:
    """The audit events of a cancel, and the loop's wake-up if anything changed."""
    for changed, to in ((ended, JobState.CANCELLED), (stopping, JobState.CANCELLING)):
        line = f"{actor.name}: -> {to.value}"
        insert_events(session, now_t_s, "cancel", [{"job_id": i, "message": line} for i in changed])
    if ended or stopping or wake:
        request_wake(session)
