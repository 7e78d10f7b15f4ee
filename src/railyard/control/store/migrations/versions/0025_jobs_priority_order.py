"""jobs (priority DESC, number, array_index) indexed: the jobs list sorted by priority walks
it instead of sorting every job (PostgreSQL's top-N sort of 110,000 jobs took 160 ms)

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_priority_order", "jobs",
                    [sa.text("priority DESC"), "number", "array_index"])  # fmt: skip


def downgrade() -> None:
    op.drop_index("ix_jobs_priority_order", table_name="jobs")
