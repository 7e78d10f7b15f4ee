"""The store as the lifecycle sees it: rows in, a `sched.lifecycle.StepInput` out.

Reading ten thousand pending rows on every step would starve the API, so the reader keeps
the pending and live job rows it has read, and each step reads only the rows written since
its last read (``jobs.change_seq``, `control.store.jobchanges`): a few dozen on a busy
cluster, whatever the queue holds. A row that says the same as the one kept is not converted
again. The loop's reasons of pending jobs do not count as writes (the store's triggers leave
``change_seq`` alone for them); the reader takes them from the loop (:meth:`WorldReader.wrote`),
so a cycle that turns ten thousand reasons costs one UPDATE and no read. The nodes and queues
are read again only when the store's config number moved (`control.store.sharedreads`). The
run-time history (`sched.history`) is read from the store once, when the loop starts; after
that the loop records each completion it writes, by the same rule as the simulator.

New pending rows are converted at most ``convert_max_rows`` a step: a 10,000-task array that
has just landed is converted over several steps, the number left in ``Seen.backlog``; the
loop plans only once nothing is left (`control.loop`).

A row whose conversion raises (a column no release of ours writes, a bug) is left out of the
step and named in ``Seen.broken`` with the error; the loop holds that job (`SchedulerError`)
and the step goes on for everyone else. It is converted again when its row changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from typing import Any, TypeVarTuple

from sqlalchemy import Row, Select, or_, select
from sqlalchemy.orm import Session

from railyard.control.store.convert import (
    SCHED_COLUMNS,
    SCHED_NAMES,
    job_of_columns,
    to_node,
    to_queue,
    to_running,
    usage_from_rows,
)
from railyard.control.store.jobchanges import change_mark, changed_since
from railyard.control.store.sharedreads import config_number
from railyard.control.store.tables import (
    HOLDING_STATES,
    JobRow,
    JobState,
    NodeRow,
    QueueRow,
    UsageRow,
    User,
)
from railyard.sched import Job, Node, Queue, RunningJob, SchedulerConfig
from railyard.sched.dependencies import named_ids
from railyard.sched.history import Predictions, RuntimeHistory
from railyard.sched.lifecycle import Exit, StepInput, StepPlan, history_run

HISTORY_JOBS = 2000  # completed jobs a starting loop seeds the run-time history with
PENDING = JobState.PENDING.value
WATCHED = (PENDING, *HOLDING_STATES)  # the states a step reads jobs in
# A row's columns by position: ten times faster than by name (0.05 vs 0.64 us a read of a
# SQLAlchemy Row), which counts over a new array's ten thousand rows.
_ID, _USER, _STATE, _REASON, _SUBMIT, _DEPENDENCY = (
    SCHED_NAMES.index(name)
    for name in ("id", "user_id", "state", "reason", "submit_t_s", "dependency")
)
_submit_order = itemgetter(_SUBMIT, _ID)


@dataclass
class Seen:
    """What the writer needs to know of the rows the plan was made from."""

    reasons: dict[str, str] = field(default_factory=dict)  # pending job -> stored reason
    nominated: set[str] = field(default_factory=set)
    running: dict[str, RunningJob] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # started job -> stored state
    backlog: int = 0  # new pending rows left unconverted by a bounded read
    images: dict[str, str] = field(default_factory=dict)  # pending job -> its container image
    dependencies: dict[str, str] = field(default_factory=dict)  # pending job -> --dependency
    broken: dict[str, BaseException] = field(default_factory=dict)  # job -> its conversion's


class WorldReader:
    _mark: int | None  # read the rows changed from here; None: read them all
    _rows: dict[str, Any]  # pending job -> its row, in submit order
    _unsorted: bool  # a row came out of submit order (`_pending_jobs` sorts)
    _last_key: tuple[float, str]
    _jobs: dict[str, Job]  # pending job -> its conversion
    _unconverted: dict[str, None]  # pending rows not converted yet
    _reasons: dict[str, str]  # pending job -> its stored reason
    _nominated: set[str]
    _images: dict[str, str]
    _live: dict[str, tuple[Any, RunningJob]]  # started job -> (row, run)
    _live_unsorted: bool
    _broken: dict[str, BaseException]  # pending job -> why its row did not convert

    def __init__(self, scheduler: SchedulerConfig) -> None:
        self.scheduler = scheduler
        self._users: dict[int, str] = {}
        self._config: tuple[int, list[Node], list[Queue]] | None = None  # (number, nodes, queues)
        self._clear()
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
            self._clear()
        nodes, queues = self._config_rows(session)
        mark = change_mark(session)  # before the read: what commits meanwhile is read next time
        if mark is None or self._mark is None:
            self._take(_core(session, select(*SCHED_COLUMNS).where(JobRow.state.in_(WATCHED))),
                       everything=True)  # fmt: skip
        else:
            self._take(changed_since(session, self._mark, SCHED_COLUMNS), everything=False)
        self._mark = mark
        seen = Seen(backlog=self._convert(convert_max_rows), broken=self._broken)
        self._broken = {}
        pending = self._pending_jobs(seen)
        if self._live_unsorted:  # in submit order too, whatever order they changed in
            self._live = dict(sorted(self._live.items(), key=lambda kv: _submit_order(kv[1][0])))
            self._live_unsorted = False
        for job_id, (row, run) in self._live.items():
            seen.running[job_id] = run
            seen.states[job_id] = row[_STATE]
        usage = usage_from_rows(session.scalars(select(UsageRow)))
        dependent = [job for job in pending if job.dependencies]
        seen.dependencies = {job.id: self._rows[job.id][_DEPENDENCY] for job in dependent}
        wanted = {i for job in dependent for i in named_ids(job)}
        states, times = job_states(session, wanted) if wanted else ({}, {})
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
            job_states=states,
            job_times=times,
        )
        return given, seen

    def _clear(self) -> None:
        """Keep no job: the next read reads them all."""
        self._mark = None
        self._rows = {}
        self._unsorted = False
        self._last_key = (float("-inf"), "")
        self._jobs = {}
        self._unconverted = {}
        self._reasons = {}
        self._nominated = set()
        self._images = {}
        self._live = {}
        self._live_unsorted = False
        self._broken = {}

    def wrote(self, reasons: Mapping[str, str]) -> None:
        """The loop wrote these pending jobs' reasons (and the store counted no change)."""
        kept = self._reasons
        for job_id, reason in reasons.items():
            if job_id in kept:
                kept[job_id] = reason

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Around a step's transaction: if it fails, read everything next time. The read saw
        the step's own writes, which the rollback took back without a new change number (and
        on SQLite gave the numbers it took to the next writer, the config number's too)."""
        try:
            yield
        except BaseException:
            self._mark, self._config = None, None
            raise

    def _config_rows(self, session: Session) -> tuple[list[Node], list[Queue]]:
        """The nodes and queues, read again only when the config number moved."""
        number = config_number(session)  # before the read, as the change mark
        if number is not None and self._config is not None and self._config[0] == number:
            return self._config[1], self._config[2]
        nodes = [to_node(r) for r in session.scalars(select(NodeRow).order_by(NodeRow.name))]
        queues = [to_queue(r) for r in session.scalars(select(QueueRow))]
        self._config = None if number is None else (number, nodes, queues)
        return nodes, queues

    def _take(self, rows: Sequence[Any], *, everything: bool) -> None:
        """Keep what these rows say; with ``everything``, rows not among them have left."""
        if everything:
            present = {r[_ID] for r in rows}
            for job_id in [i for i in self._rows if i not in present]:
                self._drop_pending(job_id)
            for job_id in [i for i in self._live if i not in present]:
                del self._live[job_id]
        known = self._rows
        new: list[Any] = []
        other: list[Any] = []
        for row in rows:  # a new array's ten thousand rows are taken in bulk (`_add`)
            (new if row[_STATE] == PENDING and row[_ID] not in known else other).append(row)
        if new:
            self._add(new)
        for row in other:  # after a cancel of an array, ten thousand that left
            state, job_id = row[_STATE], row[_ID]
            if state == PENDING:
                self._put_pending(row)
            elif state in HOLDING_STATES:
                self._drop_pending(job_id)
                kept = self._live.get(job_id)
                self._live_unsorted |= kept is None
                if kept is None or kept[0] != row:
                    self._live[job_id] = (row, to_running(row, self._users.get(row[_USER], "?")))
            else:
                self._drop_pending(job_id)
                self._live.pop(job_id, None)

    def _add(self, new: list[Any]) -> None:
        """Pending rows not kept yet, to convert."""
        new.sort(key=_submit_order)
        ids = [row[_ID] for row in new]
        for job_id in self._live.keys() & ids:  # requeued
            del self._live[job_id]
        first, last = _submit_order(new[0]), _submit_order(new[-1])
        self._unsorted |= first < self._last_key
        self._last_key = max(self._last_key, last)
        self._rows.update(zip(ids, new, strict=True))
        self._reasons.update(zip(ids, [row[_REASON] for row in new], strict=True))
        self._unconverted.update(dict.fromkeys(ids))

    def _put_pending(self, row: Any) -> None:
        """A pending row read again: converted again only if it says something new."""
        job_id = row[_ID]
        self._reasons[job_id] = row[_REASON]
        kept = self._rows[job_id]
        self._rows[job_id] = row
        if _same_job(kept, row):
            return
        self._unsorted |= kept[_SUBMIT] != row[_SUBMIT]
        self._forget_job(job_id)
        self._unconverted[job_id] = None

    def _drop_pending(self, job_id: str) -> None:
        if self._rows.pop(job_id, None) is not None:
            self._reasons.pop(job_id, None)
            self._unconverted.pop(job_id, None)
            self._forget_job(job_id)

    def _forget_job(self, job_id: str) -> None:
        if self._jobs.pop(job_id, None) is not None:
            self._nominated.discard(job_id)
            self._images.pop(job_id, None)

    def _convert(self, limit: int | None) -> int:
        """Convert new pending rows, the first ``limit`` of them if bounded; the number left."""
        todo = list(islice(self._unconverted, limit))  # as they came: new ones by submit order
        for job_id in todo:
            row = self._rows[job_id]
            try:
                job = job_of_columns(row, self._users.get(row[_USER], "?"))
            except Exception as exc:  # this job's, not the step's: left out and held
                self._broken[job_id] = exc
                self._drop_pending(job_id)
                continue
            self._jobs[job_id] = job
            if job.nominated:
                self._nominated.add(job_id)
            if job.image is not None:
                self._images[job_id] = job.image
            del self._unconverted[job_id]
        return len(self._unconverted)

    def _pending_jobs(self, seen: Seen) -> list[Job]:
        """The converted pending jobs, in submit order, and what the writer needs of them."""
        if self._unsorted:
            self._rows = dict(sorted(self._rows.items(), key=lambda kv: _submit_order(kv[1])))
            self._unsorted = False
            last = next(reversed(self._rows.values()), None)
            self._last_key = _submit_order(last) if last is not None else (float("-inf"), "")
        jobs = self._jobs
        if self._unconverted:
            out = [j for i in self._rows if (j := jobs.get(i)) is not None]
        else:
            out = list(map(jobs.__getitem__, self._rows))
        seen.reasons = dict(self._reasons)
        seen.nominated = set(self._nominated)
        seen.images = dict(self._images)
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


def _same_job(kept: Any, row: Any) -> bool:
    """Two reads of one pending row say the same of the job (the reason is the loop's)."""
    return bool(kept[:_REASON] == row[:_REASON] and kept[_REASON + 1 :] == row[_REASON + 1 :])


def _core(session: Session, stmt: Select[*_Ts]) -> Sequence[Row[*_Ts]]:
    """``stmt``'s rows through the session's connection, without the ORM's result layer
    (a third of the time of reading ten thousand rows; cProfile)."""
    return session.connection().execute(stmt).all()


def job_states(session: Session, ids: set[str]) -> tuple[dict[str, str], dict[str, float]]:
    """What dependencies read of the jobs they name: "pending", "running" or the end state;
    an array's number stands for all its tasks (pending while any waits, running while any
    runs, completed when all did, else the first end that was not). And when each started,
    or ended without starting (an array: its last task's), which `after:ID+MIN` counts
    from."""
    rows = session.execute(
        select(
            JobRow.id, JobRow.state, JobRow.array_parent, JobRow.start_t_s, JobRow.end_t_s
        ).where(or_(JobRow.id.in_(ids), JobRow.array_parent.in_(ids)))
    )
    out: dict[str, str] = {}
    times: dict[str, float] = {}
    tasks: dict[str, list[str]] = {}
    for job_id, state, parent, start_t_s, end_t_s in rows:
        since = start_t_s if start_t_s is not None else end_t_s
        if job_id in ids:
            out[job_id] = _dependency_state(state)
            if since is not None:
                times[job_id] = since
        if parent in ids:
            tasks.setdefault(parent, []).append(_dependency_state(state))
            if since is not None:
                times[parent] = max(since, times.get(parent, since))
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
    return out, times


def _dependency_state(state: str) -> str:
    if state == JobState.PENDING.value:
        return "pending"
    return "running" if state in HOLDING_STATES else state
