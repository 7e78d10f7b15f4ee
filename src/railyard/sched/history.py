"""Run-time history: the predictions backfill uses where a job has no time limit.

One rule for both drivers, so the digital twin estimates as the live cluster does: a driver
records each run that counts (`lifecycle.history_run`: a first attempt that completed) when
its settlement is applied, and hands every step `predictions_at(now)`. Those are a fixed copy,
renewed at the first step at least `refresh_s` after the last renewal once a run was recorded
since (0, the default: the first step after each completion). The live loop seeds the history
from the store once, when it starts; after that neither driver reads history from anywhere.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Mapping

from railyard.sched.config import SchedulerConfig

Predictions = Mapping[tuple[str, str | None], float]
"""(queue, user) -> predicted run time in seconds; (queue, None) is the queue-wide figure."""


class RuntimeHistory:
    """Per user and queue the mean of the last two run times (Tsafrir, Etsion and
    Feitelson, IEEE TPDS 18(6), 2007), per queue the median of the last `per_queue`."""

    def __init__(self, per_queue: int = 100, refresh_s: float = 0.0, enabled: bool = True) -> None:
        self._by_user: dict[tuple[str, str], deque[float]] = {}
        self._by_queue: dict[str, deque[float]] = {}
        self._per_queue = per_queue
        self.refresh_s = refresh_s
        self.enabled = enabled
        self.predictions: dict[tuple[str, str | None], float] = {}  # with every run recorded
        self._shown: Predictions = {}
        self._shown_t_s: float | None = None
        self._changed = False

    @classmethod
    def of(cls, config: SchedulerConfig) -> RuntimeHistory:
        """The history a scheduler configuration asks for (none if it estimates without)."""
        return cls(refresh_s=config.history_refresh_s, enabled=config.estimate_from_history)

    def record(self, queue: str, user: str, run_s: float) -> None:
        if not self.enabled:
            return
        mine = self._by_user.setdefault((queue, user), deque(maxlen=2))
        mine.append(run_s)
        self.predictions[queue, user] = statistics.fmean(mine)
        theirs = self._by_queue.setdefault(queue, deque(maxlen=self._per_queue))
        theirs.append(run_s)
        self.predictions[queue, None] = statistics.median(theirs)
        self._changed = True

    def predictions_at(self, now_t_s: float) -> Predictions:
        """What a step at `now_t_s` estimates from (see the module docstring); a clock that
        went back renews at once."""
        last = self._shown_t_s
        if self._changed and (last is None or not 0 <= now_t_s - last < self.refresh_s):
            self._shown = dict(self.predictions)  # a step must see a fixed copy
            self._shown_t_s = now_t_s
            self._changed = False
        return self._shown
