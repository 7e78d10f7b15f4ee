"""queues.is_default: Slurm's Default=YES: a job for the queue above goes to this one

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "queues",
        sa.Column("is_default", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    # Queues stored before are none's default: a job names its queue, as before.


def downgrade() -> None:
    op.drop_column("queues", "is_default")
