"""scheduler round 2: queue time limits and preemption bounds, job lifecycle fields

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


def upgrade() -> None:
    with op.batch_alter_table("queues", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "priority_preemption", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )
        batch_op.add_column(sa.Column("default_time_s", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("max_time_s", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("max_min_runtime_s", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("max_checkpoint_grace_s", sa.Float(), nullable=True))
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("warn_before_s", sa.Float(), nullable=True))
        batch_op.add_column(
            sa.Column("warned", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(
            sa.Column("attained_gpu_s", sa.Float(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("nominated", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        for name in ("nominated", "attained_gpu_s", "warned", "warn_before_s"):
            batch_op.drop_column(name)
    with op.batch_alter_table("queues", schema=None) as batch_op:
        for name in (
            "max_checkpoint_grace_s",
            "max_min_runtime_s",
            "max_time_s",
            "default_time_s",
            "priority_preemption",
        ):
            batch_op.drop_column(name)
