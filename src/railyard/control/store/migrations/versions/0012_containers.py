"""containers: jobs.container (the image and its options) and queues.container_mounts (what
its jobs may mount)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("container", sa.JSON(), nullable=True))
    op.add_column("queues", sa.Column("container_mounts", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("queues", "container_mounts")
    op.drop_column("jobs", "container")
