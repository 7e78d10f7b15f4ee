"""attempts: each attempt of a job that held GPUs, one row per UTC day it ran in, written
when it ends; usage_days: their GPU-seconds per day, user and queue (what ``railyard report``
and the accounting page sum)

Jobs that ended before this revision get their last attempt from their own row, and the GPU
time of earlier attempts (``attained_gpu_s``, kept without times) as one attempt that ended
when the last one began: totals stay exact, only that earlier time's place in the calendar is
approximate. The cut by day is written out here (a migration must not import the code that
later revisions change).

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_ENDED = ("completed", "failed", "cancelled", "timeout", "node_fail")
_DAY_S = 86400.0


def _by_day(start: float, end: float) -> Iterator[tuple[float, float, float]]:
    day = start - start % _DAY_S
    while day < end:
        yield day, max(start, day), min(end, day + _DAY_S)
        day += _DAY_S


def upgrade() -> None:
    attempts = op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("day_t_s", sa.Float(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("user_name", sa.String(64), nullable=False),
        sa.Column("queue", sa.String(64), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("start_t_s", sa.Float(), nullable=False),
        sa.Column("end_t_s", sa.Float(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
    )
    op.create_index("ix_attempts_day_t_s", "attempts", ["day_t_s"])
    op.create_index("ix_attempts_job_id", "attempts", ["job_id"])
    days = op.create_table(
        "usage_days",
        sa.Column("day_t_s", sa.Float(), primary_key=True),
        sa.Column("user_name", sa.String(64), primary_key=True),
        sa.Column("queue", sa.String(64), primary_key=True),
        sa.Column("gpu_s", sa.Float(), nullable=False),
    )
    _backfill(attempts, days)


def _backfill(attempts: sa.Table, days: sa.Table) -> None:
    found = op.get_bind().execute(sa.text(
        "SELECT j.id, j.restart_count, u.name, j.queue, j.workers * j.gpus_per_worker, "
        "j.start_t_s, j.end_t_s, j.state, j.attained_gpu_s, j.updated_t_s "
        "FROM jobs AS j JOIN users AS u ON u.id = j.user_id "
        "WHERE j.start_t_s IS NOT NULL OR j.attained_gpu_s > 0"
    ))  # fmt: skip
    rows: list[dict[str, object]] = []
    totals: dict[tuple[float, str, str], float] = {}

    def add(job: str, n: int, user: str, queue: str, gpus: int, start: float, end: float,
            state: str) -> None:  # fmt: skip
        for day, lo, hi in _by_day(start, end):
            rows.append({"day_t_s": day, "job_id": job, "attempt": n, "user_name": user,
                         "queue": queue, "gpus": gpus, "start_t_s": lo, "end_t_s": hi,
                         "state": state})  # fmt: skip
            totals[(day, user, queue)] = totals.get((day, user, queue), 0.0) + gpus * (hi - lo)

    for job, n, user, queue, gpus, start, end, state, attained, updated in found:
        if not gpus:
            continue
        if state in _ENDED and start is not None and end is not None and end > start:
            add(job, n, user, queue, gpus, start, end, state)
        if attained and attained > 0:  # earlier attempts, before the last began
            last = start if start is not None else updated
            add(job, 0, user, queue, gpus, last - attained / gpus, last, "requeue")
    if rows:
        op.bulk_insert(attempts, rows)
    if totals:
        op.bulk_insert(days, [{"day_t_s": d, "user_name": u, "queue": q, "gpu_s": g}
                              for (d, u, q), g in totals.items()])  # fmt: skip


def downgrade() -> None:
    op.drop_table("usage_days")
    op.drop_table("attempts")
