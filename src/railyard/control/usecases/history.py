"""The cluster's recent past for the overview: GPU utilization and pending jobs over a window
(1 hour to 7 days, the charts' range picker), and busy GPUs per day, all from one source.

The source is ``gpu_steps``: the store's triggers on ``jobs`` (migration 0030) keep how the
busy GPUs and the pending jobs changed in each minute as rows are written, so a window's
figures are the live ones (running and pending jobs now, read through the state index) with
the window's steps taken back, minute by minute. A view reads at most a row per minute of
its window whatever the number of jobs that ended in it (100,000 ended in 15 minutes took the
overview 941 ms when every one was read; issue 60). The 7-day bars integrate the same steps,
so "today" and "now" measure the same thing: GPUs held by jobs (before, "today" summed only
attempts that had ended, and read 0% beside a cluster busy "now" with jobs not yet done).
Whole-cluster counts only, so every viewer may see them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railyard.control.store.tables import ACTIVE_STATES, GpuStepRow, JobRow, JobState

if TYPE_CHECKING:  # numpy is imported where a chart is drawn: 140 ms of a server's start
    import numpy as np

HISTORY_S = 6 * 3600.0
BUCKETS = 36  # points on a chart: ten minutes each over six hours
SPANS_S = {"1h": 3600.0, "6h": HISTORY_S, "24h": 86400.0, "7d": 7 * 86400.0}
STEP_S = 60.0  # gpu_steps' grain


class History(NamedTuple):
    """One point per bucket edge, oldest first (the last one is now)."""

    utilization: list[float]  # busy GPUs over all GPUs, 0..1
    pending_jobs: list[float]


def minute_after(t_s: float) -> float:
    """The whole minute at or after ``t_s``: where a change at ``t_s`` counts from (as the
    migration's triggers round it)."""
    return math.ceil(t_s / STEP_S) * STEP_S


def _now(session: Session) -> tuple[float, float]:
    """GPUs held and jobs pending now, through the state index."""
    holding = [s for s in ACTIVE_STATES if s != JobState.PENDING.value]
    busy = session.scalar(
        select(func.coalesce(func.sum(JobRow.workers * JobRow.gpus_per_worker), 0)).where(
            JobRow.state.in_(holding), JobRow.start_t_s.is_not(None)
        )
    )
    pending = session.scalar(select(func.count()).where(JobRow.state == JobState.PENDING.value))
    return float(busy or 0), float(pending or 0)


def _steps(session: Session, after_t_s: float, now_t_s: float) -> np.ndarray:
    """``[(minute, busy change, pending change)]`` after ``after_t_s`` up to now, in order."""
    import numpy as np

    rows = session.execute(
        select(GpuStepRow.t_s, GpuStepRow.busy_gpus, GpuStepRow.pending_jobs)
        .where(GpuStepRow.t_s > after_t_s, GpuStepRow.t_s <= minute_after(now_t_s))
        .order_by(GpuStepRow.t_s)
    ).all()
    return np.array(rows, dtype=float).reshape(-1, 3)


def _at(edges: np.ndarray, steps: np.ndarray, now: tuple[float, float], now_t_s: float
        ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Busy GPUs and pending jobs at each edge: now's less every change after the edge."""
    import numpy as np

    after = np.concatenate([np.cumsum(steps[::-1, 1:], axis=0)[::-1], np.zeros((1, 2))])
    index = np.searchsorted(steps[:, 0], edges, side="right")
    later = after[index]
    later[edges >= now_t_s] = 0.0  # now is the live figure, whatever the minute's rounding
    return now[0] - later[:, 0], now[1] - later[:, 1]


def edges_of(span_s: float, now_t_s: float) -> np.ndarray:
    """The charts' points: ``BUCKETS`` edges ending now, each but the last on a whole minute
    (where the steps are exact)."""
    import numpy as np

    edges = np.linspace(now_t_s - span_s, now_t_s, BUCKETS + 1)[1:]
    edges[:-1] = np.floor(edges[:-1] / STEP_S) * STEP_S
    return edges


def history(session: Session, now_t_s: float, total_gpus: int,
            span_s: float = HISTORY_S) -> History:  # fmt: skip
    """Utilization and pending jobs at each point of the last ``span_s``."""
    import numpy as np

    edges = edges_of(span_s, now_t_s)
    steps = _steps(session, float(edges[0]), now_t_s)
    busy, pending = _at(edges, steps, _now(session), now_t_s)
    util = busy / total_gpus if total_gpus else np.zeros(len(edges))
    return History([min(1.0, max(0.0, u)) for u in util.tolist()],
                   [max(0.0, p) for p in pending.tolist()])  # fmt: skip


def busy_gpu_s(session: Session, cuts: list[tuple[float, float]], now_t_s: float) -> list[float]:
    """GPU-seconds held in each ``(start, end)`` of ``cuts`` (in order, ending by now): the
    integral of the busy GPUs the steps draw."""
    import numpy as np

    if not cuts:
        return []
    start = cuts[0][0]
    steps = _steps(session, start, now_t_s)
    busy_now, _ = _now(session)
    first, _ = _at(np.array([start]), steps, (busy_now, 0.0), now_t_s)
    # the busy count is piecewise constant: first from `start`, changing at each step's minute
    times = np.concatenate([[start], np.minimum(steps[:, 0], now_t_s), [now_t_s]])
    levels = np.concatenate([first, first[0] + np.cumsum(steps[:, 1])])
    area = np.concatenate([[0.0], np.cumsum(levels * np.diff(times))])

    def integral(t: float) -> float:
        """GPU-seconds from ``start`` to ``t``."""
        i = int(np.searchsorted(times, t, side="right")) - 1
        i = max(0, min(i, len(levels) - 1))
        return float(area[i] + levels[i] * (t - times[i]))

    return [max(0.0, integral(min(hi, now_t_s)) - integral(lo)) for lo, hi in cuts]
