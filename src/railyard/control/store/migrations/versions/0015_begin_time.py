"""jobs.begin_t_s: sbatch's --begin, the earliest a job may start (reason BeginTime until then)

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("begin_t_s", sa.Float(), nullable=True))
    # Jobs stored before have none: eligible at once, as before.


def downgrade() -> None:
    op.drop_column("jobs", "begin_t_s")
