"""Launching the jobs a step wrote STARTING, each on its own: one job's failure is that job's,
and no step launches for longer than its budget.

The step only queues what it decided (:meth:`Starter.queue`); :meth:`Starter.launch` then
launches from the front of that queue until ``budget_s`` has passed (at least one launch a
step), and leaves the rest STARTING for the next step, so cancels and exits are settled
between two slices of a burst (one step launching 500 jobs serially held every cancel and
settle for over 10 s, and the store dated them all at the step's time).

Each launch first reads its row, and builds the launch spec from it: a job stopped since the
step decided (cancelled, preempted) is not launched, and one that this process queued and
never launched is settled at once by an exit the loop carries to its next step (what the
sweep would do a minute later). Rows queued by recovery or the sweep may have been launched
by an earlier server, so they are started anyway: the executor's start is idempotent per
attempt and returns the running attempt's handle.

The executor starts each job, then every outcome of the slice is written in one short
transaction: the launched rows get their handle and their start time, the time the launch
really happened (RUNNING, in one statement); a refused launch (``ExecutorError``, ``OSError``)
goes back to PENDING with a counted try, or to FAILED after ``max_tries``; any other exception
(a bug in building the spec or in the executor) holds the job with the reason
``SchedulerError: ...``, as an admin's hold, and the others go on. If that transaction fails
(a locked or full store), each row is written in a transaction of its own, so one bad write
strands no other job; a row whose write failed stays STARTING and the loop's sweep
(`control.stuck`) starts it again later, which returns the running attempt's handle instead
of launching twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, bindparam, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from railyard.control.loop.apply import cas
from railyard.control.store.database import Store
from railyard.control.store.effects import record
from railyard.control.store.tables import JobRow, JobState
from railyard.control.store.transitions import changed_rows, transition
from railyard.control.usecases.loopstatus import SCHEDULER_ERROR, LoopHealth
from railyard.exec.protocol import Executor, ExecutorError, JobHandle, LaunchSpec
from railyard.sched.lifecycle import Exit, ExitKind

log = logging.getLogger("railyard.loop")
MAX_START_TRIES = 3  # refused launches of one attempt before the job fails
LAUNCH_BUDGET_S = 0.5
"""How long one step launches before it leaves the rest to the next step."""
REFUSALS = (ExecutorError, OSError)  # the executor said no: tried again, then FAILED
MAX_TRIES_KEPT = 10_000  # attempts whose refused launches are counted; the oldest forgotten


@dataclass(frozen=True)
class _Outcome:
    spec: LaunchSpec
    handle: JobHandle | None  # None: the executor refused
    error: str = ""
    tries: int = 0
    launched_t_s: float = 0.0


def scheduler_error(exc: BaseException) -> str:
    """``SchedulerError: KeyError: 'x'``: the reason of a job the loop could not handle."""
    line = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    return f"{SCHEDULER_ERROR}: {line}"[:256]


def hold_for_error(
    session: Session, job_id: str, states: Sequence[JobState], reason: str, now_t_s: float,
    attempt: int | None = None,
) -> bool:  # fmt: skip
    """Hold a job the loop could not handle: back to PENDING (if it was STARTING), held as an
    admin holds, with ``reason``; an admin releases it once the cause is fixed. True: held."""
    values = {
        "state": JobState.PENDING.value,
        "hold": "admin",
        "reason": reason,
        "placement": None,
        "start_t_s": None,
        "nominated": False,
        "updated_t_s": now_t_s,
    }
    if transition(session, job_id, states, values, attempt=attempt):
        record(session, now_t_s, "hold", reason, job_id)
        return True
    return False


class Starter:
    """Launches the queued STARTING jobs within a budget and records what happened; counts
    refused tries per attempt."""

    def __init__(
        self,
        store: Store,
        executor: Executor,
        health: LoopHealth,
        clock: Callable[[], float],
        spec_of: Callable[[JobRow], LaunchSpec],
        *,
        max_tries: int = MAX_START_TRIES,
    ) -> None:
        self.store, self.executor, self.health, self.clock = store, executor, health, clock
        self.spec_of = spec_of
        self.max_tries = max_tries
        # (job, attempt) -> refused launches: forgotten once the attempt launches or fails,
        # and the oldest past MAX_TRIES_KEPT (a job cancelled between tries: a few more tries)
        self._tries: dict[tuple[str, int], int] = {}
        self._queued: dict[tuple[str, int], bool] = {}  # (job, attempt) -> queued by a step
        self.exits: list[Exit] = []  # stopped before this process launched them: to settle
        # False: launch nothing now (a PostgreSQL server not surely active, `store.lease`)
        self.may_launch: Callable[[], bool] = lambda: True

    @property
    def waiting(self) -> int:
        """Jobs queued and not launched yet."""
        return len(self._queued)

    def queued(self, job_id: str) -> bool:
        return any(key[0] == job_id for key in self._queued)

    def queue(self, jobs: Iterable[tuple[str, int]], *, fresh: bool) -> None:
        """Queue STARTING jobs (id, attempt) for launch. ``fresh``: this process's step wrote
        them STARTING (never launched by anyone); else recovery or the sweep found them."""
        for key in jobs:
            self._queued.setdefault(key, fresh)

    def cancelled(self, job_ids: Iterable[str], now_t_s: float) -> None:
        """These jobs are CANCELLING in the store: the ones this process queued and never
        launched leave the queue and end by an exit at once, not when their turn comes."""
        wanted = set(job_ids)
        for key in [k for k, fresh in self._queued.items() if fresh and k[0] in wanted]:
            del self._queued[key]
            self.exits.append(Exit(key[0], key[1], ExitKind.KILLED, t_s=now_t_s))

    def take_exits(self) -> list[Exit]:
        exits, self.exits = self.exits, []
        return exits

    def launch(self, budget_s: float = LAUNCH_BUDGET_S) -> list[str]:
        """Launch from the front of the queue until ``budget_s`` passed (one at least), record
        every outcome; returns the jobs launched and recorded. A failure of the store (not of
        one job) leaves the job at the front and is raised: the step failed."""
        began = time.perf_counter()
        outcomes: list[_Outcome] = []
        tried = 0
        while self._queued and (tried == 0 or time.perf_counter() - began < budget_s):
            if not self.may_launch():
                break
            key, fresh = next(iter(self._queued.items()))
            spec = self._spec(key, fresh)  # raises only when the store fails
            del self._queued[key]
            if spec is None:
                continue
            tried += 1
            outcomes.append(self._launch(spec))
        self.health.waiting(self.waiting)
        return self._record(outcomes)

    def _spec(self, key: tuple[str, int], fresh: bool) -> LaunchSpec | None:
        """The launch spec of a queued job still to launch, else None (stopped, moved on, or
        held because no spec could be made of its row)."""
        job_id, attempt = key
        now_t_s = self.clock()
        with self.store.session() as session:
            row = session.get(JobRow, job_id)
            if row is None or row.restart_count != attempt or row.handle is not None:
                return None
            if row.state != JobState.STARTING.value:
                if fresh and row.state in _STOPPED:  # never launched: it ends now
                    kind = ExitKind.KILLED if row.state == JobState.CANCELLING.value else (
                        ExitKind.LOST)  # fmt: skip
                    self.exits.append(Exit(job_id, attempt, kind, t_s=now_t_s))
                elif not fresh and row.state in _STOPPED:  # maybe launched before a restart
                    return self._spec_or_hold(session, row, now_t_s)
                return None
            return self._spec_or_hold(session, row, now_t_s)

    def _spec_or_hold(self, session: Session, row: JobRow, now_t_s: float) -> LaunchSpec | None:
        try:
            return self.spec_of(row)
        except Exception as exc:  # a bad row must not fail every step from now on
            log.exception("no launch spec for %s", row.id)
            reason = scheduler_error(exc)
        # a stopping row keeps its state: the sweep settles it once its deadline passed
        hold_for_error(session, row.id, [JobState.STARTING], reason, now_t_s,
                       attempt=row.restart_count)  # fmt: skip
        return None

    def _record(self, outcomes: Sequence[_Outcome]) -> list[str]:
        if not outcomes:
            return []
        now_t_s = self.clock()
        try:
            with self.store.session() as session:
                return self._write_all(session, outcomes, now_t_s)
        except Exception as exc:  # one transaction for the step failed: one per job then
            log.warning("recording %d starts failed (%s); one by one", len(outcomes), exc)
            self.health.failed(exc, now_t_s, step_ended=False)
        recorded = []
        for outcome in outcomes:
            try:
                with self.store.session() as session:
                    if self._write(session, outcome, now_t_s):
                        recorded.append(outcome.spec.job_id)
            except Exception as exc:  # stays STARTING: the sweep starts it again later
                if isinstance(exc, OperationalError):  # the store away: one line, as a step's
                    first = str(exc).strip().splitlines()[0]
                    log.warning("recording the start of %s failed: %s", outcome.spec.job_id, first)
                else:  # a bug: its traceback
                    log.exception("recording the start of %s failed", outcome.spec.job_id)
                self.health.failed(exc, now_t_s, step_ended=False)
        return recorded

    def _launch(self, spec: LaunchSpec) -> _Outcome:
        key = (spec.job_id, spec.restart_count)
        try:
            handle = self.executor.start(spec)
        except REFUSALS as exc:  # a launch that cannot happen must not wedge the queue
            log.exception("start of %s failed", spec.job_id)
            tries = self._tries.pop(key, 0) + 1
            if tries < self.max_tries:  # the last try fails the job: nothing to count then
                self._tries[key] = tries  # (re-inserted: the newest)
                while len(self._tries) > MAX_TRIES_KEPT:
                    del self._tries[next(iter(self._tries))]
            return _Outcome(spec, None, f"{type(exc).__name__}: {exc}", tries)
        except Exception as exc:  # the loop's own error: this job is held, the rest go on
            log.exception("start of %s raised", spec.job_id)
            self._tries.pop(key, None)
            return _Outcome(spec, None, scheduler_error(exc))
        self._tries.pop(key, None)
        launched_t_s = self.clock()
        self.health.launched(launched_t_s)
        return _Outcome(spec, handle, launched_t_s=launched_t_s)

    def _write_all(
        self, session: Session, outcomes: Sequence[_Outcome], now_t_s: float
    ) -> list[str]:
        """Every outcome's compare-and-set; the launched ones STARTING -> RUNNING in one
        statement (a first plan's thousand launches were a thousand round trips), each one
        on its own only when some row had moved (stopping meanwhile: it keeps its handle)."""
        launched = [o for o in outcomes if o.handle is not None]
        jobs = cast(Table, JobRow.__table__)
        stmt = (
            update(jobs)
            .where(jobs.c.id == bindparam("b_id"), jobs.c.state == JobState.STARTING.value,
                   jobs.c.restart_count == bindparam("b_attempt"))
            .values(handle=bindparam("b_handle"), start_t_s=bindparam("b_start"),
                    updated_t_s=now_t_s, state=JobState.RUNNING.value)
        )  # fmt: skip
        params = [{"b_id": o.spec.job_id, "b_attempt": o.spec.restart_count,
                   "b_handle": o.handle.to_dict(), "b_start": o.launched_t_s}
                  for o in launched if o.handle]  # fmt: skip
        done = set()
        if params and changed_rows(session, stmt, params) == len(params):
            done = {o.spec.job_id for o in launched}
        return [o.spec.job_id for o in outcomes
                if o.spec.job_id in done or self._write(session, o, now_t_s)]  # fmt: skip

    def _write(self, session: Session, outcome: _Outcome, now_t_s: float) -> bool:
        """The outcome's compare-and-set; True for a launch recorded on its row."""
        spec, attempt = outcome.spec, outcome.spec.restart_count
        if outcome.handle is not None:  # the row may be stopping already: keep the handle
            values = {"handle": outcome.handle.to_dict(), "start_t_s": outcome.launched_t_s,
                      "updated_t_s": now_t_s}  # fmt: skip
            running = {**values, "state": JobState.RUNNING.value}
            if transition(session, spec.job_id, [JobState.STARTING], running, attempt=attempt):
                return True
            return transition(session, spec.job_id, _STOPPING, values, attempt=attempt)
        if outcome.error.startswith(f"{SCHEDULER_ERROR}:"):
            hold_for_error(session, spec.job_id, [JobState.STARTING], outcome.error, now_t_s,
                           attempt=attempt)  # fmt: skip
            return False
        error = outcome.error.splitlines()[0] if outcome.error else "unknown"
        if outcome.tries >= self.max_tries:
            reason = f"LaunchFailed after {outcome.tries} tries: {error}"[:256]
            if cas(
                session,
                spec.job_id,
                JobState.STARTING.value,
                state=JobState.FAILED.value,
                reason=reason,
                end_t_s=now_t_s,
                updated_t_s=now_t_s,
            ):
                record(session, now_t_s, JobState.FAILED.value, reason, spec.job_id)
            return False
        reason = f"LaunchFailed (try {outcome.tries} of {self.max_tries}): {error}"[:256]
        back = {
            "state": JobState.PENDING.value,
            "placement": None,
            "start_t_s": None,
            "nominated": False,
            "reason": reason,
            "updated_t_s": now_t_s,
        }
        if transition(session, spec.job_id, [JobState.STARTING], back, attempt=attempt):
            record(session, now_t_s, "requeue", reason, spec.job_id)
        return False


# Where a launch's handle still belongs when the row is no longer STARTING: asked to stop
# meanwhile (or already RUNNING, when a restart started it again).
_STOPPING = (JobState.RUNNING, JobState.PREEMPTING, JobState.CANCELLING)
_STOPPED = (
    JobState.CANCELLING.value,
    JobState.PREEMPTING.value,
)  # asked to stop before their launch
