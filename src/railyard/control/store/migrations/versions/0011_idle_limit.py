"""interactive capacity: queues.idle_limit_s and queues.pool (a node pool its jobs run on),
jobs.active_t_s (when the user last sent the job anything)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("queues", sa.Column("idle_limit_s", sa.Float(), nullable=True))
    op.add_column("queues", sa.Column("pool", sa.String(length=64), nullable=True))
    op.add_column("jobs", sa.Column("active_t_s", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "active_t_s")
    op.drop_column("queues", "pool")
    op.drop_column("queues", "idle_limit_s")
