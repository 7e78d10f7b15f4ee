"""How the scheduler loop is doing, for ``/healthz``: a server whose loop fails every step
(a full disk, a store that went away, a bad row) must not answer "ok"."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from railyard.control.errors import describe_failure

FAILING_AFTER_STEPS = 3  # consecutive failed steps before /healthz says failing
STALLED_AFTER_S = 120.0  # no step finished for this long while the loop runs


@dataclass
class LoopHealth:
    """The loop's last successful step and its failures since; written by the loop's thread,
    read by the API's."""

    failing_after: int = FAILING_AFTER_STEPS
    stalled_after_s: float = STALLED_AFTER_S
    started_t_s: float | None = None
    last_ok_t_s: float | None = None
    last_error: str | None = None
    failing_steps: int = 0  # consecutive, reset by a good step
    failed_steps_total: int = 0  # since the server started, for /metrics
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def begin(self, now_t_s: float) -> None:
        with self._lock:
            self.started_t_s = self.started_t_s or now_t_s

    def ok(self, now_t_s: float) -> None:
        with self._lock:
            self.last_ok_t_s, self.failing_steps = now_t_s, 0

    def failed(self, exc: BaseException) -> None:
        refusal = describe_failure(exc)
        line = refusal.line() if refusal else f"{type(exc).__name__}: {exc}".splitlines()[0]
        with self._lock:
            self.last_error, self.failing_steps = line[:300], self.failing_steps + 1
            self.failed_steps_total += 1

    def problem(self, now_t_s: float) -> str | None:
        """Why the loop is unhealthy, in one line, or None."""
        with self._lock:
            if self.failing_steps >= self.failing_after:
                return (
                    f"scheduler loop: the last {self.failing_steps} steps failed: {self.last_error}"
                )
            since = self.last_ok_t_s or self.started_t_s
            if since is not None and now_t_s - since > self.stalled_after_s:
                return f"scheduler loop: no step finished for {now_t_s - since:.0f} s"
            return None
