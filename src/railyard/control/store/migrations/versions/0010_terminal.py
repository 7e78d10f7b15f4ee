"""interactive jobs: jobs.terminal ('' batch, 'pipes' or 'pty': ``railyard run``)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "jobs", sa.Column("terminal", sa.String(length=8), nullable=False, server_default="")
    )


def downgrade() -> None:
    op.drop_column("jobs", "terminal")
