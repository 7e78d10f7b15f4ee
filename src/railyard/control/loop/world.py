"""The store as the lifecycle sees it: rows in, a `sched.lifecycle.StepInput` out.

Converting ten thousand pending rows on every step would starve the API, so pending and live
jobs are cached by id and ``updated_t_s`` (every write to a job row bumps it) and only new or
changed rows are read in full. The run-time history (`sched.history`) is read from the store
once, when the loop starts; after that the loop records each completion it writes, by the
same rule as the simulator.

A cached row is trusted only if it was written strictly before the step that read it and
before the step that uses it: every later write, the loop's own included, then carries a
newer ``updated_t_s``, even on a virtual clock where several steps share one instant. The one
write that leaves the stamp alone is the loop's own reason of a pending job (`control.apply`),
which the cache takes from the loop (:meth:`WorldReader.wrote`): a cycle that turns ten
thousand reasons costs one UPDATE, not a full read of those rows on the next step.

A read may be bounded (``convert_max_rows``): a 10,000-task array that has just landed is then
converted over several steps, the number left in ``Seen.backlog``; the loop plans only once
nothing is left (`control.loop`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, TypeVarTuple

from sqlalchemy import ColumnElement, Row, Select, or_, select
from sqlalchemy.orm import Session

from railyard.control.store.convert import (
    SCHED_COLUMNS,
    job_of_columns,
    to_node,
    to_queue,
    to_running,
    usage_from_rows,
)
from railyard.control.store.tables import (
    HOLDING_STATES,
    JobRow,
    JobState,
    NodeRow,
    QueueRow,
    UsageRow,
    User,
)
from railyard.sched import Job, RunningJob, SchedulerConfig
from railyard.sched.dependencies import named_ids
from railyard.sched.history import Predictions, RuntimeHistory
from railyard.sched.lifecycle import Exit, StepInput, StepPlan, history_run

HISTORY_JOBS = 2000  # completed jobs a starting loop seeds the run-time history with
FULL_READ_MIN = 1000  # changed rows from which one query reads them all (`_rows`)


@dataclass
class Seen:
    """What the writer needs to know of the rows the plan was made from."""

    reasons: dict[str, str] = field(default_factory=dict)  # pending job -> stored reason
    nominated: set[str] = field(default_factory=set)
    running: dict[str, RunningJob] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # started job -> stored state
    backlog: int = 0  # new pending rows left unread by a bounded read (`WorldReader._pending`)
    images: dict[str, str] = field(default_factory=dict)  # pending job -> its container image


class WorldReader:
    def __init__(self, scheduler: SchedulerConfig) -> None:
        self.scheduler = scheduler
        self._users: dict[int, str] = {}
        self._pending_cache: dict[str, tuple[float, str, Job]] = {}  # (updated, reason, job)
        self._live_cache: dict[str, tuple[float, str, RunningJob]] = {}  # (updated, state, run)
        self._history = RuntimeHistory.of(scheduler)
        self._history_seeded = False

    def read(
        self,
        session: Session,
        now_t_s: float,
        exits: Sequence[Exit],
        last_accrual_t_s: float | None,
        convert_max_rows: int | None = None,
    ) -> tuple[StepInput, Seen]:
        """The step's input; at most ``convert_max_rows`` new pending rows are converted, the
        number left is ``Seen.backlog``."""
        users = {u.id: u.name for u in session.scalars(select(User))}
        if users != self._users:  # a job carries its user's name: convert again
            self._users = users
            self._pending_cache, self._live_cache = {}, {}
        nodes = [to_node(r) for r in session.scalars(select(NodeRow).order_by(NodeRow.name))]
        queues = [to_queue(r) for r in session.scalars(select(QueueRow))]
        seen = Seen()
        self._live(session, users, seen, now_t_s)
        pending = self._pending(session, users, seen, now_t_s, convert_max_rows)
        usage = usage_from_rows(session.scalars(select(UsageRow)))
        wanted = {i for job in pending if job.dependencies for i in named_ids(job)}
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

    def wrote(self, reasons: Mapping[str, str]) -> None:
        """The loop wrote these pending jobs' reasons (and left their stamps alone)."""
        cache = self._pending_cache
        for job_id, reason in reasons.items():
            if job_id in cache:
                updated_t_s, _, job = cache[job_id]
                cache[job_id] = (updated_t_s, reason, job)

    def _live(self, session: Session, users: dict[int, str], seen: Seen, now_t_s: float) -> None:
        where = JobRow.state.in_(HOLDING_STATES)
        keys = _core(session, select(JobRow.id, JobRow.updated_t_s, JobRow.state).where(where))
        got = _fresh(self._live_cache, keys, now_t_s)
        for r in _rows(session, [i for i, _, _ in keys if i not in got], len(keys), where):
            if r.state in HOLDING_STATES:  # else it ended between the two reads
                got[r.id] = (r.updated_t_s, r.state, to_running(r, users.get(r.user_id, "?")))
        self._live_cache = _cacheable(got, now_t_s)
        for job_id, _, _ in keys:
            if job_id in got:
                _, state, run = got[job_id]
                seen.running[job_id] = run
                seen.states[job_id] = state

    def _pending(
        self,
        session: Session,
        users: dict[int, str],
        seen: Seen,
        now_t_s: float,
        convert_max_rows: int | None,
    ) -> list[Job]:
        """The pending jobs, in submit order. New or changed rows are converted, at most
        ``convert_max_rows`` of those that can be kept for later steps; the rest are counted
        in ``seen.backlog`` and left for the next read (the loop makes no plan until it has seen
        every pending job, see `control.loop`)."""
        where = JobRow.state == JobState.PENDING.value
        keys = _core(
            session,
            select(JobRow.id, JobRow.updated_t_s, JobRow.reason)
            .where(where)
            .order_by(JobRow.submit_t_s, JobRow.id),
        )
        # One pass per step over ten thousand keys costs milliseconds each: the loops below
        # are comprehensions over lists aligned with `keys` (a third of the per-row loop).
        get = self._pending_cache.get
        entries: list[tuple[float, str, Job] | None] = [
            e if (e := get(i)) is not None and e[0] == t and e[1] == w and t < now_t_s else None
            for i, t, w in keys
        ]
        missing = [(k[0], k[1]) for k, e in zip(keys, entries, strict=True) if e is None]
        if convert_max_rows is not None and len(missing) > convert_max_rows:
            missing, seen.backlog = _budget(missing, now_t_s, convert_max_rows)
        if missing:
            got: dict[str, tuple[float, str, Job]] = {}
            for r in _rows(session, [i for i, _ in missing], len(keys), where):
                if r.state == JobState.PENDING.value:  # else it left between the two reads
                    got[r.id] = (
                        r.updated_t_s,
                        r.reason,
                        job_of_columns(r, users.get(r.user_id, "?")),
                    )
            entries = [e or got.get(k[0]) for k, e in zip(keys, entries, strict=True)]
        kept = [e for e in entries if e is not None]
        self._pending_cache = {e[2].id: e for e in kept if e[0] < now_t_s}
        seen.reasons = {e[2].id: e[1] for e in kept}
        out = [e[2] for e in kept]
        seen.nominated = {job.id for job in out if job.nominated}
        seen.images = {job.id: job.image for job in out if job.image is not None}
        return out

    def settled(self, plan: StepPlan, seen: Seen, finished: Sequence[str], now_t_s: float) -> None:
        """The loop committed these jobs' ends: the runs among them enter the history."""
        done = set(finished)
        for s in plan.settled:
            run = seen.running.get(s.job_id)
            counted = history_run(s, run, now_t_s) if run is not None and s.job_id in done else None
            if counted is not None:
                self._history.record(*counted)

    def _predictions(self, session: Session, users: dict[int, str], now_t_s: float) -> Predictions:
        if self._history.enabled and not self._history_seeded:
            self._history_seeded = True
            rows = session.execute(
                select(JobRow.queue, JobRow.user_id, JobRow.start_t_s, JobRow.end_t_s)
                .where(JobRow.state == JobState.COMPLETED.value, JobRow.restart_count == 0)
                .order_by(JobRow.end_t_s.desc())
                .limit(HISTORY_JOBS)
            ).all()
            for queue, user_id, start, end in reversed(rows):
                if start is not None and end is not None:
                    self._history.record(queue, users.get(user_id, "?"), end - start)
        return self._history.predictions_at(now_t_s)


_Ts = TypeVarTuple("_Ts")
_Entry = TypeVar("_Entry", bound=tuple[float, str, object])


def _fresh(
    cache: dict[str, _Entry], keys: Sequence[Row[str, float, str]], now_t_s: float
) -> dict[str, _Entry]:
    """The cached rows that still stand: same stamp and same state or reason (a writer that
    changes either without the stamp is seen too), written before this step's instant."""
    out = {}
    for job_id, updated_t_s, word in keys:
        entry = cache.get(job_id)
        if entry is not None and entry[:2] == (updated_t_s, word) and updated_t_s < now_t_s:
            out[job_id] = entry
    return out


def _cacheable(got: dict[str, _Entry], now_t_s: float) -> dict[str, _Entry]:
    """What may be kept for later steps: rows written before this step's instant (a later
    write at this same instant, on a virtual clock, would carry the same stamp)."""
    return {i: e for i, e in got.items() if e[0] < now_t_s}


def _core(session: Session, stmt: Select[*_Ts]) -> Sequence[Row[*_Ts]]:
    """``stmt``'s rows through the session's connection, without the ORM's result layer
    (a third of the time of reading ten thousand rows; cProfile)."""
    return session.connection().execute(stmt).all()


def _budget(
    missing: list[tuple[str, float]], now_t_s: float, limit: int
) -> tuple[list[tuple[str, float]], int]:
    """Which of the missing rows to convert now, and how many are left: every row stamped at
    or after the step's instant (it is read every step anyway, so leaving it would never end a
    backlog), and the first ``limit`` others, in submit order."""
    older = [m for m in missing if m[1] < now_t_s]
    return [m for m in missing if m[1] >= now_t_s] + older[:limit], max(0, len(older) - limit)


def _rows(
    session: Session, ids: list[str], total: int, where: ColumnElement[bool]
) -> Iterator[Any]:
    """The scheduler's columns of these jobs (a row stamped at or after the step's instant is
    read every time, see the module docstring): 500 ids a query, or, when they are most of
    the ``total`` rows that match ``where`` (a new 10,000-task array), every matching row in
    one query, which costs less than binding ten thousand ids."""
    if len(ids) > FULL_READ_MIN and 2 * len(ids) > total:
        wanted = set(ids)
        rows = _core(session, select(*SCHED_COLUMNS).where(where))
        yield from (r for r in rows if r.id in wanted)
        return
    for chunk in range(0, len(ids), 500):
        yield from _core(
            session, select(*SCHED_COLUMNS).where(JobRow.id.in_(ids[chunk : chunk + 500]))
        )


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
