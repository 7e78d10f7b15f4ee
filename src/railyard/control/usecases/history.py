"""The cluster's recent past for the overview: GPU utilization and pending jobs over the last
six hours, rebuilt from the jobs' submit, start and end times (the store keeps no samples).
Whole-cluster counts only, so every viewer may see them; nothing here loads every job."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from railyard.control.store.tables import JobRow

HISTORY_S = 6 * 3600.0
BUCKETS = 36  # ten minutes each


class History(NamedTuple):
    """One point per bucket, oldest first."""

    utilization: list[float]  # busy GPUs over all GPUs, 0..1
    pending_jobs: list[float]


def history(session: Session, now_t_s: float, total_gpus: int) -> History:
    since = now_t_s - HISTORY_S
    rows = session.execute(
        select(JobRow.submit_t_s, JobRow.start_t_s, JobRow.end_t_s, JobRow.workers,
               JobRow.gpus_per_worker)
        .where(JobRow.submit_t_s <= now_t_s)
        .where(or_(JobRow.end_t_s.is_(None), JobRow.end_t_s >= since))
    ).all()  # fmt: skip
    edges = np.linspace(since, now_t_s, BUCKETS + 1)[1:]
    if not rows:
        return History([0.0] * BUCKETS, [0.0] * BUCKETS)
    data = np.array([(s, st if st is not None else np.inf, e if e is not None else np.inf,
                      w * g) for s, st, e, w, g in rows], dtype=float)  # fmt: skip
    submit, start, end, gpus = data.T
    at = edges[:, None]
    running = (start <= at) & (at < end)
    pending = (submit <= at) & (at < np.minimum(start, end))
    busy = (running * gpus).sum(axis=1)
    util = (busy / total_gpus).tolist() if total_gpus else [0.0] * BUCKETS
    return History([min(1.0, u) for u in util], pending.sum(axis=1).astype(float).tolist())
