"""Launching the jobs a step wrote STARTING, each on its own: one job's failure is that job's.

The executor starts each job (its start is idempotent per attempt), then every outcome of the
step is written in one short transaction: the launched rows get their handle (RUNNING, in one
statement), a
refused launch goes back to PENDING with a counted try, or to FAILED after ``max_tries``. If
that transaction fails (a locked or full store), each row is written in a transaction of its
own, so one bad write strands no other job; a row whose write failed stays STARTING and the
loop's sweep (`control.stuck`) starts it again later, which returns the running attempt's
handle instead of launching twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, bindparam, update
from sqlalchemy.orm import Session

from railyard.control.loop.apply import cas
from railyard.control.store.database import Store
from railyard.control.store.effects import record
from railyard.control.store.tables import JobRow, JobState
from railyard.control.store.transitions import changed_rows, transition
from railyard.control.usecases.loopstatus import LoopHealth
from railyard.exec.protocol import Executor, JobHandle, LaunchSpec

log = logging.getLogger("railyard.loop")
MAX_START_TRIES = 3  # refused launches of one attempt before the job fails


@dataclass(frozen=True)
class _Outcome:
    spec: LaunchSpec
    handle: JobHandle | None  # None: the executor refused
    error: str = ""
    tries: int = 0


class Starter:
    """Starts launch specs and records what happened; counts refused tries per attempt."""

    def __init__(
        self,
        store: Store,
        executor: Executor,
        health: LoopHealth,
        clock: Callable[[], float],
        *,
        max_tries: int = MAX_START_TRIES,
    ) -> None:
        self.store, self.executor, self.health, self.clock = store, executor, health, clock
        self.max_tries = max_tries
        self._tries: dict[tuple[str, int], int] = {}  # (job, attempt) -> refused launches

    def start(self, specs: Sequence[LaunchSpec]) -> list[str]:
        """Launch each spec, record every outcome; returns the jobs launched and recorded."""
        outcomes = [self._launch(spec) for spec in specs]
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
                log.exception("recording the start of %s failed", outcome.spec.job_id)
                self.health.failed(exc, now_t_s, step_ended=False)
        return recorded

    def fail(self, job_id: str, attempt: int, error: str) -> None:
        """Fail a STARTING job that cannot be launched at all (no launch spec from its row);
        a failed write leaves it to the sweep."""
        reason = f"LaunchFailed: {error.splitlines()[0] if error else 'unknown'}"[:256]
        now_t_s = self.clock()
        try:
            with self.store.session() as session:
                failed = {
                    "state": JobState.FAILED.value,
                    "reason": reason,
                    "end_t_s": now_t_s,
                    "updated_t_s": now_t_s,
                }
                if transition(session, job_id, [JobState.STARTING], failed, attempt=attempt):
                    record(session, now_t_s, JobState.FAILED.value, reason, job_id)
        except Exception as exc:
            log.exception("failing %s failed", job_id)
            self.health.failed(exc, now_t_s, step_ended=False)

    def _launch(self, spec: LaunchSpec) -> _Outcome:
        try:
            return _Outcome(spec, self.executor.start(spec))
        except Exception as exc:  # a launch that cannot happen must not wedge the queue
            log.exception("start of %s failed", spec.job_id)
            key = (spec.job_id, spec.restart_count)
            self._tries[key] = self._tries.get(key, 0) + 1
            return _Outcome(spec, None, f"{type(exc).__name__}: {exc}", self._tries[key])

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
            .values(handle=bindparam("b_handle"), updated_t_s=now_t_s,
                    state=JobState.RUNNING.value)
        )  # fmt: skip
        params = [{"b_id": o.spec.job_id, "b_attempt": o.spec.restart_count,
                   "b_handle": o.handle.to_dict()} for o in launched if o.handle]  # fmt: skip
        done = set()
        if params and changed_rows(session, stmt, params) == len(params):
            done = {o.spec.job_id for o in launched}
        return [o.spec.job_id for o in outcomes
                if o.spec.job_id in done or self._write(session, o, now_t_s)]  # fmt: skip

    def _write(self, session: Session, outcome: _Outcome, now_t_s: float) -> bool:
        """The outcome's compare-and-set; True for a launch recorded on its row."""
        spec, attempt = outcome.spec, outcome.spec.restart_count
        if outcome.handle is not None:  # the row may be stopping already: keep the handle
            values = {"handle": outcome.handle.to_dict(), "updated_t_s": now_t_s}
            running = {**values, "state": JobState.RUNNING.value}
            if transition(session, spec.job_id, [JobState.STARTING], running, attempt=attempt):
                return True
            return transition(session, spec.job_id, _STOPPING, values, attempt=attempt)
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
