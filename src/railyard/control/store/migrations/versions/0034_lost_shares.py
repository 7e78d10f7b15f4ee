"""lost_shares: one node's share of an attempt lost with its Ray node agent while its ranks
may live on, kept until an agent there ended them (issue 55: a restarted control plane forgot
them and placed attempt 1 beside attempt 0's ranks on the same GPUs).

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lost_shares",
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("restart_count", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("node", sa.String(128), nullable=False),
        sa.Column("handle", sa.JSON(), nullable=False),
        sa.Column("lost_t_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "restart_count", "node"),
    )


def downgrade() -> None:
    op.drop_table("lost_shares")
