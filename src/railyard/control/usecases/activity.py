"""When a user last sent an interactive job anything: what its queue's idle limit counts from.

The bridges (a terminal's keystrokes, an attached shell's, a proxied notebook request) call
:meth:`Activity.touch` on every message from the client; the store is written at most once
per ``every_s`` for a job (a keystroke stream must not become a stream of writes), so the
stored ``active_t_s`` lags by at most that much, which an idle limit of minutes does not
notice. The write bumps ``updated_t_s`` as every write to a job row does, so the loop's cache
of live jobs (`control.loop.world`) reads the new time, and `sched.lifecycle` moves the job's
idle deadline. Only a live row is touched: activity cannot revive an ended job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError

from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, JobState

log = logging.getLogger(__name__)
WRITE_EVERY_S = 30.0
_LIVE = (JobState.RUNNING.value, JobState.STARTING.value)


class Activity:
    """Throttled writes of ``jobs.active_t_s``, shared by every bridge of one server."""

    def __init__(
        self, store: Store, clock: Callable[[], float], every_s: float = WRITE_EVERY_S
    ) -> None:
        self.store, self.clock, self.every_s = store, clock, every_s
        self._written: dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, job_id: str) -> bool:
        """Whether a touch now would write (cheap: callers on the event loop ask first)."""
        last = self._written.get(job_id)
        return last is None or self.clock() - last >= self.every_s

    def touch(self, job_id: str) -> bool:
        """Record activity now; True if this call wrote it (blocking: run it off the loop)."""
        now_t_s = self.clock()
        with self._lock:
            last = self._written.get(job_id)
            if last is not None and now_t_s - last < self.every_s:
                return False
            self._written[job_id] = now_t_s
            if len(self._written) > 10_000:  # ended jobs' entries: forget the oldest half
                for stale in sorted(self._written, key=self._written.__getitem__)[:5_000]:
                    del self._written[stale]
        try:
            with self.store.session(write=True) as session:
                session.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, JobRow.state.in_(_LIVE))
                    .values(active_t_s=now_t_s, updated_t_s=now_t_s)
                    .execution_options(synchronize_session=False)
                )
        except SQLAlchemyError as exc:  # a busy store: the next message tries again
            log.warning("job %s: activity not recorded: %s", job_id, exc)
            with self._lock:
                self._written.pop(job_id, None)
            return False
        return True
