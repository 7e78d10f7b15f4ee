"""scheduler round 2: queue time limits and preemption bounds, job lifecycle fields

Plain ADD COLUMN (no batch table rebuild): SQLite rebuilds would trip the foreign keys of
existing jobs, and every column here is nullable or has a server default.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

QUEUE_COLUMNS = [
    sa.Column("priority_preemption", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("default_time_s", sa.Float(), nullable=True),
    sa.Column("max_time_s", sa.Float(), nullable=True),
    sa.Column("max_min_runtime_s", sa.Float(), nullable=True),
    sa.Column("max_checkpoint_grace_s", sa.Float(), nullable=True),
]
JOB_COLUMNS = [
    sa.Column("warn_before_s", sa.Float(), nullable=True),
    sa.Column("warned", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("attained_gpu_s", sa.Float(), nullable=False, server_default="0"),
    sa.Column("nominated", sa.Boolean(), nullable=False, server_default=sa.false()),
]


def upgrade() -> None:
    for column in QUEUE_COLUMNS:
        op.add_column("queues", column)
    for column in JOB_COLUMNS:
        op.add_column("jobs", column)


def downgrade() -> None:
    for column in reversed(JOB_COLUMNS):
        op.drop_column("jobs", column.name)
    for column in reversed(QUEUE_COLUMNS):
        op.drop_column("queues", column.name)
