"""The cluster's recent past for the overview: GPU utilization and pending jobs over the last
six hours, rebuilt from the jobs' submit, start and end times.
Whole-cluster counts only, so every viewer may see them; nothing here loads every job."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railyard.control.store.tables import ACTIVE_STATES, JobRow, JobState

HISTORY_S = 6 * 3600.0
BUCKETS = 36  # ten minutes each


class History(NamedTuple):
    """One point per bucket, oldest first."""

    utilization: list[float]  # busy GPUs over all GPUs, 0..1
    pending_jobs: list[float]


def _waiting_counts(session: Session, since: float, now_t_s: float) -> list[float]:
    """Jobs pending now (a requeue clears ``start_t_s``: each has waited since its submit),
    per bucket edge, from two aggregates: those submitted before the window, and the others
    per submit time (an array's tasks share one). Never the 10,000 rows themselves."""
    pending = JobRow.state == JobState.PENDING.value
    before = session.execute(
        select(func.count()).where(pending, JobRow.submit_t_s <= since)
    ).scalar_one()
    later = session.execute(
        select(JobRow.submit_t_s, func.count())
        .where(pending, JobRow.submit_t_s > since, JobRow.submit_t_s <= now_t_s)
        .group_by(JobRow.submit_t_s)
    ).all()
    edges = _edges(since, now_t_s)
    counts = np.full(BUCKETS, float(before))
    for submit, count in later:
        counts += (edges >= submit) * float(count)
    return [float(c) for c in counts]


def _edges(since: float, now_t_s: float) -> np.ndarray:
    return np.linspace(since, now_t_s, BUCKETS + 1)[1:]


def history(session: Session, now_t_s: float, total_gpus: int) -> History:
    """Every job that held GPUs or waited in the window: the pending ones counted in SQL
    (`_waiting_counts`), the running ones and those that ended in the window read."""
    since = now_t_s - HISTORY_S
    columns = (JobRow.submit_t_s, JobRow.start_t_s, JobRow.end_t_s, JobRow.workers,
               JobRow.gpus_per_worker)  # fmt: skip
    active = [s for s in ACTIVE_STATES if s != JobState.PENDING.value]
    rows = [
        *session.execute(select(*columns).where(JobRow.submit_t_s <= now_t_s,
                                                JobRow.state.in_(active))),
        *session.execute(select(*columns).where(JobRow.submit_t_s <= now_t_s,
                                                JobRow.end_t_s >= since)),
    ]  # fmt: skip
    waiting = _waiting_counts(session, since, now_t_s)
    if not rows:
        return History([0.0] * BUCKETS, waiting)
    data = np.array([(s, st if st is not None else np.inf, e if e is not None else np.inf,
                      w * g) for s, st, e, w, g in rows], dtype=float)  # fmt: skip
    submit, start, end, gpus = data.T
    at = _edges(since, now_t_s)[:, None]
    running = (start <= at) & (at < end)
    pending = (submit <= at) & (at < np.minimum(start, end))
    busy = (running * gpus).sum(axis=1)
    util = (busy / total_gpus).tolist() if total_gpus else [0.0] * BUCKETS
    counts = (pending.sum(axis=1) + np.array(waiting)).astype(float).tolist()
    return History([min(1.0, u) for u in util], counts)
