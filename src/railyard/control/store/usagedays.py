"""Ended attempts into the accounting tables: cut at UTC midnights (``attempts`` rows) and
added to their day's total (``usage_days``). Only the loop writes them, in the step's
transaction that settles the attempts (one server per store), so a read-add-write is safe."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import insert
from sqlalchemy.orm import Session

from railyard.control.store.tables import AttemptRow, UsageDayRow

DAY_S = 86400.0


def day_of(t_s: float) -> float:
    """The UTC midnight at or before ``t_s``."""
    return t_s - t_s % DAY_S


def by_day(start_t_s: float, end_t_s: float) -> Iterator[tuple[float, float, float]]:
    """``(day, start, end)`` for each UTC day ``[start_t_s, end_t_s)`` touches."""
    day = day_of(start_t_s)
    while True:
        yield day, max(start_t_s, day), min(end_t_s, day + DAY_S)
        day += DAY_S
        if day >= end_t_s:
            return


@dataclass(frozen=True)
class Ended:
    """One attempt that held GPUs, as it ended."""

    job_id: str
    attempt: int
    user_name: str
    queue: str
    gpus: int
    start_t_s: float
    end_t_s: float
    state: str


def record_attempts(session: Session, ended: Sequence[Ended]) -> None:
    """One ``attempts`` row per attempt and day, and each day's total moved by as much."""
    rows = []
    totals: dict[tuple[float, str, str], float] = {}
    for a in ended:
        if a.end_t_s <= a.start_t_s or a.gpus <= 0:
            continue
        for day, lo, hi in by_day(a.start_t_s, a.end_t_s):
            rows.append({"day_t_s": day, "job_id": a.job_id, "attempt": a.attempt,
                         "user_name": a.user_name, "queue": a.queue, "gpus": a.gpus,
                         "start_t_s": lo, "end_t_s": hi, "state": a.state})  # fmt: skip
            key = (day, a.user_name, a.queue)
            totals[key] = totals.get(key, 0.0) + a.gpus * (hi - lo)
    if not rows:
        return
    session.execute(insert(AttemptRow), rows)
    for (day, user_name, queue), gpu_s in totals.items():
        found = session.get(UsageDayRow, (day, user_name, queue))
        if found is None:
            session.add(UsageDayRow(day_t_s=day, user_name=user_name, queue=queue, gpu_s=gpu_s))
        else:
            found.gpu_s += gpu_s
    session.flush()
