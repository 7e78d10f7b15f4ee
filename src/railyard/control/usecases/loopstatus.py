"""How the scheduler loop is doing, for ``/healthz``, ``/metrics`` and the dashboard: a server
whose loop's last step failed, fell behind, started no job for ``start_stall_s`` while jobs
were decided to start, or left jobs stranded in a transient state must not answer "ok". A
job the loop could not handle (a bug's exception while converting, launching or settling it)
is held with a ``SchedulerError:`` reason and the step goes on: /healthz says "degraded" (200)
and counts them, it does not fail.

The loop's thread writes :class:`LoopHealth`; the API's threads read it, and count stranded
rows in the store themselves (:func:`loop_status`), so the answer holds even when the loop's
thread is wedged."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railyard.control.errors import describe_failure
from railyard.control.store.stuck import IDS_SHOWN, Deadlines, StuckCount, count_stuck
from railyard.control.store.tables import JobRow, JobState

SCHEDULER_ERROR = "SchedulerError"
"""The reason's prefix of a job the loop held because handling it raised (`control.loop`)."""
START_STALL_S = 30.0
"""/healthz fails when no job started for this long while some were decided to start."""
BEHIND_PERIODS = 5  # the loop is behind when no step ended for this many periods...
BEHIND_FLOOR_S = 15.0  # ...and at least this long (a step starting 1,000 jobs takes seconds)


@dataclass
class LoopHealth:
    """The loop's last steps and failures; written by the loop's thread, read by the API's.
    ``deadlines``: when a row in a transient state counts as stuck (`control.stuck`)."""

    behind_after_s: float = BEHIND_FLOOR_S
    start_stall_s: float = START_STALL_S
    deadlines: Deadlines = field(default_factory=Deadlines)
    started_t_s: float | None = None
    last_start_t_s: float | None = None  # the last launch the executor made
    waiting_starts: int = 0  # jobs decided to start and not launched yet, after the last step
    last_ok_t_s: float | None = None  # end of the last step without any failure
    last_step_t_s: float | None = None  # end of the last step, failed or not
    last_failed_t_s: float | None = None
    last_error: str | None = None
    failing_steps: int = 0  # consecutive, reset by a good step
    failed_steps_total: int = 0  # since the server started, for /metrics
    _failed_now: bool = field(default=False, repr=False)  # a failure in the current step
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def for_interval(cls, cycle_interval_s: float, start_stall_s: float) -> LoopHealth:
        behind_s = max(BEHIND_FLOOR_S, BEHIND_PERIODS * cycle_interval_s)
        return cls(behind_s, start_stall_s, Deadlines.for_interval(cycle_interval_s))

    def begin(self, now_t_s: float) -> None:
        with self._lock:
            self.started_t_s = self.started_t_s or now_t_s

    def launched(self, now_t_s: float) -> None:
        """The executor launched a job (the clock of "no job started for T")."""
        with self._lock:
            self.last_start_t_s = now_t_s

    def waiting(self, count: int) -> None:
        """Jobs decided to start that the executor has not launched yet."""
        with self._lock:
            self.waiting_starts = count

    def ok(self, now_t_s: float) -> None:
        """A step ended; without a failure in it, the failures in a row end too."""
        with self._lock:
            self.last_step_t_s = now_t_s
            if not self._failed_now:
                self.last_ok_t_s, self.failing_steps = now_t_s, 0
            self._failed_now = False

    def failed(self, exc: BaseException, now_t_s: float, *, step_ended: bool = True) -> None:
        """A step failed (``step_ended``), or one part of a step that goes on (a start's
        write): either way /healthz fails until a step ends without a failure (no longer:
        a recovery is reported as soon as it happens)."""
        refusal = describe_failure(exc)
        line = refusal.line() if refusal else f"{type(exc).__name__}: {exc}".splitlines()[0]
        with self._lock:
            self.last_error, self.last_failed_t_s = line[:300], now_t_s
            if not self._failed_now:
                self.failing_steps += 1
                self.failed_steps_total += 1
            self._failed_now = not step_ended
            if step_ended:
                self.last_step_t_s = now_t_s

    def behind_s(self, now_t_s: float) -> float:
        """Seconds since the last step ended (or the loop began)."""
        with self._lock:
            since = self.last_step_t_s or self.started_t_s
        return 0.0 if since is None else max(0.0, now_t_s - since)

    def problems(self, now_t_s: float) -> list[str]:
        """Why the loop is unhealthy, one line per cause (the store's stuck rows apart)."""
        out: list[str] = []
        behind_s = self.behind_s(now_t_s)
        with self._lock:
            failed = self.last_failed_t_s
            if failed is not None and self.failing_steps:
                out.append(
                    f"scheduler loop: the last failed step was {now_t_s - failed:.0f} s ago "
                    f"({self.failing_steps} in a row, {self.failed_steps_total} since start): "
                    f"{self.last_error}"
                )
            if behind_s > self.behind_after_s:
                out.append(
                    f"scheduler loop: behind: no step ended for {behind_s:.0f} s "
                    f"(hint: more than {self.behind_after_s:.0f} s; see the server's log)"
                )
            since = self.last_start_t_s or self.started_t_s
            stalled_s = 0.0 if since is None else now_t_s - since
            if self.waiting_starts and stalled_s > self.start_stall_s:
                out.append(
                    f"scheduler loop: no job started for {stalled_s:.0f} s while "
                    f"{self.waiting_starts} could start (hint: more than "
                    f"{self.start_stall_s:.0f} s; see the server's log)"
                )
        return out

    def problem(self, now_t_s: float) -> str | None:
        """The loop's own problems in one line, or None."""
        return "; ".join(self.problems(now_t_s)) or None


@dataclass(frozen=True)
class LoopStatus:
    """What /healthz, /metrics and the dashboard say about the loop, from one look."""

    problems: tuple[str, ...]
    stuck: StuckCount
    behind_s: float
    held: tuple[int, tuple[str, ...]] = (0, ())  # jobs held for a SchedulerError: count, ids

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def status(self) -> str:
        """``ok``; ``degraded`` (still 200) when jobs are held for the loop's own errors;
        ``failing`` (503) with a problem."""
        if self.problems:
            return "failing"
        return "degraded" if self.held[0] else "ok"

    def note(self) -> str | None:
        """The held jobs in one line, when there are any."""
        count, ids = self.held
        if not count:
            return None
        noun = "job" if count == 1 else "jobs"
        more = ", ..." if count > len(ids) else ""
        return (f"scheduler loop: {count} {noun} held for a SchedulerError (ids "
                f"{', '.join(ids)}{more}; hint: railyard show ID, then release it)")  # fmt: skip

    def reason(self) -> str | None:
        return "; ".join(self.problems) or None


def loop_status(session: Session, health: LoopHealth, now_t_s: float) -> LoopStatus:
    """The loop's problems and the rows stranded in a transient state past their deadline."""
    stuck = count_stuck(session, now_t_s, health.deadlines)
    problems = health.problems(now_t_s)
    if stuck.total:
        problems.append(f"scheduler loop: {stuck.line()}")
    return LoopStatus(tuple(problems), stuck, health.behind_s(now_t_s), held_jobs(session))


def held_jobs(session: Session) -> tuple[int, tuple[str, ...]]:
    """Pending jobs held for a SchedulerError: how many, and the oldest few ids."""
    held = (
        JobRow.state == JobState.PENDING.value,
        JobRow.hold.is_not(None),
        JobRow.reason.startswith(f"{SCHEDULER_ERROR}:"),
    )
    count = session.scalar(select(func.count()).select_from(JobRow).where(*held)) or 0
    if not count:
        return 0, ()
    ids = session.scalars(select(JobRow.id).where(*held).order_by(JobRow.updated_t_s)
                          .limit(IDS_SHOWN))  # fmt: skip
    return int(count), tuple(ids)
