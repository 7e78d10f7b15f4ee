"""The dashboard's jobs list: one page of lines, filtered, searched and sorted on the server,
with the pending tasks of an array folded into one line as squeue shows them
(``123_[5-9999%2]``) until they start.

A page is read as two queries: the unfolded jobs, sorted and cut at ``offset + limit`` by the
store (an index or a top-N sort, never the whole table into Python), and the folded arrays,
one row each (there are few). They are merged here by the same key and sliced, so a page
costs the same with 100,000 finished jobs as with 100.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, and_, cast, func, not_, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from railyard.control.errors import Invalid
from railyard.control.store.tables import JobRow, JobState, User

MAX_SEARCH = 100
PENDING = JobState.PENDING.value


@dataclass(frozen=True)
class ListedJob:
    """One line: a job, or an array's pending tasks (``tasks`` > 1, ``array`` set)."""

    id: str  # as squeue shows it: 12, 12_3, or 12_[4-9%2] for pending tasks
    href: str  # its page, or for folded tasks the list of the array's tasks
    name: str
    user: str
    queue: str
    state: str
    gpus: int
    priority: int
    submit_t_s: float
    start_t_s: float | None
    end_t_s: float | None
    placement: dict[str, list[int]]
    reason: str
    tasks: int = 1
    array: str | None = None
    exit_code: int | None = None
    exit_signal: str | None = None


@dataclass(frozen=True)
class JobPage:
    lines: list[ListedJob]
    total: int  # lines over all pages
    offset: int
    limit: int


# sort name -> (SQL order of unfolded rows, the same order as a Python key of a line's
# (number, array index, priority, submit time, GPUs))
_Key = tuple[float, ...]
SORTS: dict[str, tuple[Callable[[], list[Any]], Callable[[int, int, int, float, int], _Key]]] = {
    "newest": (lambda: [JobRow.number.desc(), JobRow.array_index.desc()],
               lambda n, i, p, s, g: (-n, -i)),
    "oldest": (lambda: [JobRow.number, JobRow.array_index], lambda n, i, p, s, g: (n, i)),
    "priority": (lambda: [JobRow.priority.desc(), JobRow.number, JobRow.array_index],
                 lambda n, i, p, s, g: (-p, n, i)),
    "waiting": (lambda: [JobRow.submit_t_s, JobRow.number, JobRow.array_index],
                lambda n, i, p, s, g: (s, n, i)),
    "gpus": (lambda: [(JobRow.workers * JobRow.gpus_per_worker).desc(), JobRow.number.desc(),
                      JobRow.array_index.desc()],
             lambda n, i, p, s, g: (-g, -n, -i)),
}  # fmt: skip


def job_page(
    session: Session,
    actor: User,
    *,
    state: str | None = None,
    queue: str | None = None,
    user: str | None = None,
    array: str | None = None,
    search: str | None = None,
    sort: str = "newest",
    offset: int = 0,
    limit: int = 50,
) -> JobPage:
    """A page of lines; a plain user's own jobs only. ``search`` matches a job id's start, or
    any part of its name, its user's name or its command."""
    if sort not in SORTS:
        raise Invalid("sort", f"unknown sort {sort!r}", hint="one of " + ", ".join(SORTS))
    if state is not None and state not in {s.value for s in JobState}:
        raise Invalid("state", f"unknown state {state!r}")
    where = _filters(actor, state, queue, user, array, search)
    fold = array is None and state in (None, PENDING)
    folded = and_(JobRow.array_parent.is_not(None), JobRow.state == PENDING)
    order, key = SORTS[sort]
    arrays = _folded(session, where, folded) if fold else []
    arrays.sort(key=lambda a: key(*a[0]))
    # Unfolded line r sits at r + (folded lines before it): a page [offset, offset + limit)
    # holds unfolded lines from offset - len(arrays) on, so only those are read.
    first = max(0, offset - len(arrays))
    single = select(*_COLUMNS, _USER).join(User, JobRow.user_id == User.id).where(*where)
    if fold:
        where = [*where, not_(folded)]
        single = single.where(not_(folded))
    searched = bool((search or "").strip())
    found = _sparse(session, where, key, first, offset + limit) if searched else None
    if found is None:
        window = single.order_by(*order()).offset(first).limit(offset + limit - first)
        rows = [(_sort_values(r), _line(r)) for r in session.execute(window)]
        counted = select(func.count()).select_from(JobRow).where(*where)
        unfolded = int(session.scalar(counted) or 0)
    else:
        rows, unfolded = found
    placed: list[tuple[int, ListedJob]] = []
    for rank, (values, line) in enumerate(rows, start=first):
        before = sum(1 for a in arrays if key(*a[0]) < key(*values))
        placed.append((rank + before, line))
    for n, (values, line) in enumerate(arrays):
        keyed = key(*values)
        after_window = (
            bool(rows) and keyed > key(*rows[-1][0]) and len(rows) == offset + limit - first
        )
        if (rows and keyed < key(*rows[0][0]) and first > 0) or after_window:
            continue  # off this page: before the lines read (and so before offset), or after
        before = first + sum(1 for v, _ in rows if key(*v) < keyed)
        placed.append((before + n, line))
    total = unfolded + len(arrays)
    lines = [
        line for at, line in sorted(placed, key=lambda p: p[0]) if offset <= at < offset + limit
    ]
    return JobPage(lines, total, offset, limit)


_COLUMNS = (JobRow.id, JobRow.number, JobRow.array_index, JobRow.name, JobRow.queue,
            JobRow.state, JobRow.workers, JobRow.gpus_per_worker, JobRow.priority,
            JobRow.submit_t_s, JobRow.start_t_s, JobRow.end_t_s, JobRow.placement,
            JobRow.reason, JobRow.array_parent, JobRow.array_max_running, JobRow.exit_code,
            JobRow.exit_signal)  # fmt: skip
"""What a line shows and sorts by: never the wide columns (environment, script, command)."""
_USER = User.name.label("user_name")


SPARSE = 2000  # a search matching at most this many jobs is read in one scan (`_sparse`)


def _sparse(
    session: Session,
    where: list[ColumnElement[bool]],
    key: Callable[[int, int, int, float, int], _Key],
    first: int,
    end: int,
) -> tuple[list[tuple[tuple[int, int, int, float, int], ListedJob]], int] | None:
    """A search's lines ``[first, end)`` and its count from one scan, when it matches at
    most :data:`SPARSE` jobs: their sort values are read (the scan stops past that many),
    ordered here, and the page's rows fetched by id. A search that matches more is dense, and
    the store's ordered window finds its page quickly; None then. Without this, a search
    matching nothing scanned the table twice (the window, the count): 100-170 ms with
    110,000 jobs."""
    gpus = JobRow.workers * JobRow.gpus_per_worker
    keys = session.execute(
        select(JobRow.id, JobRow.number, JobRow.array_index, JobRow.priority,
               JobRow.submit_t_s, gpus).where(*where).limit(SPARSE + 1)
    ).all()  # fmt: skip
    if len(keys) > SPARSE:
        return None
    ordered = sorted(keys, key=lambda k: key(k[1], k[2] or 0, k[3], k[4], k[5]))[first:end]
    ids = [k[0] for k in ordered]
    by_id = {r.id: r for r in session.execute(
        select(*_COLUMNS, _USER).join(User, JobRow.user_id == User.id).where(JobRow.id.in_(ids))
    )}  # fmt: skip
    return [(_sort_values(by_id[i]), _line(by_id[i])) for i in ids if i in by_id], len(keys)


def _sort_values(r: Any) -> tuple[int, int, int, float, int]:
    return (r.number, r.array_index or 0, r.priority, r.submit_t_s,
            r.workers * r.gpus_per_worker)  # fmt: skip


def _filters(
    actor: User,
    state: str | None,
    queue: str | None,
    user: str | None,
    array: str | None,
    search: str | None,
) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if not actor.is_admin:
        where.append(JobRow.user_id == actor.id)
    elif user is not None:
        where.append(JobRow.user_id.in_(select(User.id).where(User.name == user)))
    if state is not None:
        where.append(JobRow.state == state)
    if queue is not None:
        where.append(JobRow.queue == queue)
    if array is not None:
        where.append(JobRow.array_parent == array)
    text = (search or "").strip()[:MAX_SEARCH]
    if text:
        escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        anywhere = f"%{escaped}%"
        where.append(or_(
            JobRow.id.like(f"{escaped}%", escape="\\"),
            JobRow.name.like(anywhere, escape="\\"),
            JobRow.user_id.in_(select(User.id).where(User.name.like(anywhere, escape="\\"))),
            cast(JobRow.command, String).like(anywhere, escape="\\"),
        ))  # fmt: skip
    return where


def _folded(
    session: Session, where: list[ColumnElement[bool]], folded: ColumnElement[bool]
) -> list[tuple[tuple[int, int, int, float, int], ListedJob]]:
    """Each array's pending tasks as one line, with a task's row for what they share."""
    groups = session.execute(
        select(JobRow.array_parent, func.count(), func.min(JobRow.array_index),
               func.max(JobRow.array_index), func.min(JobRow.id))
        .where(*where, folded)
        .group_by(JobRow.array_parent)
    ).all()  # fmt: skip
    if not groups:
        return []
    firsts = {g[4] for g in groups}
    rows = {r.id: r for r in session.execute(
        select(*_COLUMNS, _USER).join(User, JobRow.user_id == User.id)
        .where(JobRow.id.in_(firsts)))}  # fmt: skip
    out = []
    for parent, count, low, high, first in groups:
        row = rows[first]
        lo, hi = low or 0, high or 0
        limit = f"%{row.array_max_running}" if row.array_max_running else ""
        span = f"{lo}-{hi}" if hi > lo else f"{lo}"
        shown = f"{parent}_[{span}{limit}]"
        gpus = row.workers * row.gpus_per_worker
        line = ListedJob(shown, f"/ui/jobs?array={parent}", row.name, row.user_name, row.queue,
                         PENDING, gpus, row.priority, row.submit_t_s, None, None, {},
                         row.reason, int(count), str(parent))  # fmt: skip
        values = (row.number, lo, row.priority, row.submit_t_s, gpus)
        out.append((values, line))
    return out


def _line(row: Any) -> ListedJob:
    return ListedJob(row.id, f"/ui/jobs/{row.id}", row.name, row.user_name, row.queue, row.state,
                     row.workers * row.gpus_per_worker, row.priority, row.submit_t_s,
                     row.start_t_s, row.end_t_s, dict(row.placement or {}), row.reason,
                     exit_code=row.exit_code, exit_signal=row.exit_signal)  # fmt: skip
