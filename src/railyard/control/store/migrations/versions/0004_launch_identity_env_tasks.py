"""users' Unix accounts; jobs' exported environment, tasks, CPU/memory, outputs, dependency

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JOB_COLUMNS: list[sa.Column[Any]] = [
    sa.Column("array_spec", sa.String(length=1024), nullable=True),
    sa.Column("task_number", sa.Integer(), nullable=True),
    sa.Column("unix_user", sa.String(length=64), nullable=False, server_default=""),
    sa.Column("export", sa.String(length=1024), nullable=False, server_default="ALL"),
    sa.Column("submit_dir", sa.String(length=1024), nullable=False, server_default=""),
    sa.Column("submit_host", sa.String(length=256), nullable=False, server_default=""),
    sa.Column("ntasks_per_node", sa.Integer(), nullable=True),
    sa.Column("cpus_per_task", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("mem_per_node_mb", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("cpus_per_worker", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("mem_per_worker_gb", sa.Float(), nullable=False, server_default="0"),
    sa.Column("distinct_nodes", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("output", sa.String(length=1024), nullable=True),
    sa.Column("error", sa.String(length=1024), nullable=True),
    sa.Column("dependency", sa.String(length=1024), nullable=True),
    sa.Column("requeue", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("signal_batch_shell", sa.Boolean(), nullable=False, server_default=sa.false()),
]


def upgrade() -> None:
    # Plain ADD COLUMN with a constant default: no table rebuild, which SQLite cannot do for
    # ``users`` while other tables' foreign keys point at it. The server defaults fill the old
    # rows and stay (they equal the ORM's defaults).
    op.add_column(
        "users",
        sa.Column("unix_user", sa.String(length=64), nullable=False, server_default=""),
    )
    op.execute("UPDATE users SET unix_user = name")
    for column in JOB_COLUMNS:
        op.add_column("jobs", column)
    op.create_index(op.f("ix_jobs_task_number"), "jobs", ["task_number"], unique=False)
    # Rows written before this revision: every job its own number, run as its user's account.
    op.execute("UPDATE jobs SET task_number = number WHERE array_parent IS NULL")
    op.execute(
        "UPDATE jobs SET unix_user = (SELECT users.name FROM users WHERE users.id = jobs.user_id)"
    )


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35+), for the same reason as the upgrade's plain ADD COLUMN.
    op.drop_index(op.f("ix_jobs_task_number"), table_name="jobs")
    for column in reversed(JOB_COLUMNS):
        op.drop_column("jobs", column.name)
    op.drop_column("users", "unix_user")
