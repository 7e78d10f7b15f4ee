"""priority bounds: the most priority a queue's plain members may ask, and each job's nice

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # existing queues get the default bound ("normal", 500): what every job asked by default
    op.add_column(
        "queues",
        sa.Column("max_priority", sa.Integer(), nullable=False, server_default="500"),
    )
    op.add_column("jobs", sa.Column("nice", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    op.drop_column("jobs", "nice")
    op.drop_column("queues", "max_priority")
