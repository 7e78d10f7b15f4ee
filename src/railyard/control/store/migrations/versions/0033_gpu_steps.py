"""gpu_steps: the cluster's busy GPUs and pending jobs as changes per minute, kept by triggers
on ``jobs``, so the overview's charts read a window's minutes, not every job that ended in it
(100,000 jobs ended in 15 minutes took the overview 941 ms; issue 60).

A job row counts as pending over ``[submit, start or end)`` and busy with its GPUs over
``[start, end)``, a function of its columns alone: each insert adds its row's steps and each
update of those columns takes the old row's back and adds the new one's. A step at time t
counts from the whole minute at or after t, so a sum up to a whole minute is exact.
Existing rows are counted once here.

job_samples (node, t_s) indexed: a node's GPU utilisation over a range (the dashboard's node
page) reads that node's readings, not every node's.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

COLUMNS = "submit_t_s, start_t_s, end_t_s, workers, gpus_per_worker"


def _minute(t: str) -> str:
    """SQL for the whole minute at or after ``t`` (seconds, positive); SQLite's ceil() is
    missing where it was built without its math functions, and its CAST truncates."""
    if op.get_bind().dialect.name == "postgresql":
        return f"(ceil(({t}) / 60.0) * 60.0)"
    whole = f"CAST(({t}) / 60.0 AS INTEGER)"
    return f"(({whole} + (({t}) / 60.0 > {whole})) * 60.0)"


def _steps(row: str, sign: int) -> list[tuple[str, str, str, str]]:
    """(when it applies, minute, busy change, pending change) of one row (NEW or OLD)."""
    gpus = f"{row}.workers * {row}.gpus_per_worker"
    waited_to = f"coalesce({row}.start_t_s, {row}.end_t_s)"
    return [
        (f"{row}.submit_t_s IS NOT NULL", _minute(f"{row}.submit_t_s"), "0", f"{sign}"),
        (f"{waited_to} IS NOT NULL", _minute(waited_to), "0", f"{-sign}"),
        (f"{row}.start_t_s IS NOT NULL", _minute(f"{row}.start_t_s"), f"{sign} * {gpus}", "0"),
        (f"{row}.start_t_s IS NOT NULL AND {row}.end_t_s IS NOT NULL",
         _minute(f"{row}.end_t_s"), f"{-sign} * {gpus}", "0"),
    ]  # fmt: skip


def _upserts(row: str, sign: int, end: str) -> str:
    return "".join(
        f"INSERT INTO gpu_steps (t_s, busy_gpus, pending_jobs) SELECT {t}, {busy}, {pending} "
        f"WHERE {when} ON CONFLICT (t_s) DO UPDATE SET "
        "busy_gpus = gpu_steps.busy_gpus + excluded.busy_gpus, "
        f"pending_jobs = gpu_steps.pending_jobs + excluded.pending_jobs{end}"
        for when, t, busy, pending in _steps(row, sign)
    )


def _sum_into_steps(parts: list[str], first: str = "") -> str:
    """One upsert of ``parts`` (rows of t, b, p) summed per minute: a minute's row is written
    once a statement, however many jobs it moves. ``first``: a WITH clause they read."""
    return (
        f"{first}INSERT INTO gpu_steps (t_s, busy_gpus, pending_jobs) SELECT t, sum(b), sum(p) "
        f"FROM ({' UNION ALL '.join(parts)}) AS steps GROUP BY t "
        "HAVING sum(b) <> 0 OR sum(p) <> 0 ON CONFLICT (t_s) DO UPDATE SET "
        "busy_gpus = gpu_steps.busy_gpus + excluded.busy_gpus, "
        "pending_jobs = gpu_steps.pending_jobs + excluded.pending_jobs"
    )


def _parts(alias: str, sign: int) -> list[str]:
    return [
        f"SELECT {t} AS t, {busy} AS b, {pending} AS p FROM {alias} WHERE {when}"
        for when, t, busy, pending in _steps(alias, sign)
    ]


def _postgresql_triggers() -> None:
    """Statement triggers over the transition tables: a row trigger's upsert of one hot
    minute row per job made PostgreSQL keep a dead version of it per job in the transaction
    (100,000 jobs in one insert ran for minutes); here each statement sums its rows first,
    and an update counts only the rows whose counted columns changed (not the loop's
    reasons)."""
    tracked = ", ".join(f"o.{c}" for c in COLUMNS.split(", "))
    fresh = ", ".join(f"n.{c}" for c in COLUMNS.split(", "))
    moved = (
        "WITH moved AS (SELECT n.id FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id "
        f"WHERE ({tracked}) IS DISTINCT FROM ({fresh})), "
        "o AS (SELECT * FROM old_rows WHERE id IN (SELECT id FROM moved)), "
        "n AS (SELECT * FROM new_rows WHERE id IN (SELECT id FROM moved)) "
    )
    bodies = {
        "insert": _sum_into_steps(_parts("n", 1), "WITH n AS (SELECT * FROM new_rows) "),
        "update": _sum_into_steps(_parts("o", -1) + _parts("n", 1), moved),
    }
    for name, body in bodies.items():
        op.execute(
            f"CREATE FUNCTION railyard_gpu_steps_{name}() RETURNS trigger LANGUAGE plpgsql "
            # transition tables have no statistics: the planner took 10,000 rows for a few
            # and joined them pairwise (16 s for the loop's update of 10,000 reasons)
            f"SET enable_nestloop TO off AS $$ BEGIN {body}; RETURN NULL; END $$"
        )
    op.execute(
        "CREATE TRIGGER jobs_gpu_steps_insert AFTER INSERT ON jobs "
        "REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION railyard_gpu_steps_insert()"
    )
    op.execute(  # no column list: PostgreSQL allows none beside transition tables
        "CREATE TRIGGER jobs_gpu_steps_update AFTER UPDATE ON jobs "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION railyard_gpu_steps_update()"
    )


def upgrade() -> None:
    op.create_index("ix_job_samples_node_t", "job_samples", ["node", "t_s"])
    op.create_table(
        "gpu_steps",
        sa.Column("t_s", sa.Float(), nullable=False),
        sa.Column("busy_gpus", sa.Integer(), nullable=False),
        sa.Column("pending_jobs", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("t_s"),
    )
    for when, t, busy, pending in _steps("jobs", 1):
        op.execute(
            f"INSERT INTO gpu_steps (t_s, busy_gpus, pending_jobs) "
            f"SELECT {t}, sum({busy}), sum({pending}) FROM jobs WHERE {when} GROUP BY {t} "
            "ON CONFLICT (t_s) DO UPDATE SET "
            "busy_gpus = gpu_steps.busy_gpus + excluded.busy_gpus, "
            "pending_jobs = gpu_steps.pending_jobs + excluded.pending_jobs"
        )
    if op.get_bind().dialect.name == "postgresql":
        _postgresql_triggers()
        return
    sqlite_changed = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in COLUMNS.split(", "))
    op.execute(
        f"CREATE TRIGGER jobs_gpu_steps_insert AFTER INSERT ON jobs BEGIN "
        f"{_upserts('NEW', 1, '; ')}END"
    )
    op.execute(
        f"CREATE TRIGGER jobs_gpu_steps_update AFTER UPDATE OF {COLUMNS} ON jobs "
        f"WHEN {sqlite_changed} BEGIN {_upserts('OLD', -1, '; ')}{_upserts('NEW', 1, '; ')}END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_gpu_steps_update ON jobs")
        op.execute("DROP TRIGGER jobs_gpu_steps_insert ON jobs")
        op.execute("DROP FUNCTION railyard_gpu_steps_update()")
        op.execute("DROP FUNCTION railyard_gpu_steps_insert()")
    else:
        op.execute("DROP TRIGGER jobs_gpu_steps_update")
        op.execute("DROP TRIGGER jobs_gpu_steps_insert")
    op.drop_table("gpu_steps")
    op.drop_index("ix_job_samples_node_t", table_name="job_samples")
