"""jobs.deadline_t_s: sbatch's --deadline (a job that could no longer end by then ends
DEADLINE); jobs.tasks_given: whether a task count was asked for (sbatch counts a task per
booked CPU when none was, as with --exclusive)

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("deadline_t_s", sa.Float(), nullable=True))
    # Jobs stored before have none: they wait as long as they must, as before.
    op.add_column(
        "jobs", sa.Column("tasks_given", sa.Boolean(), nullable=False, server_default=sa.true())
    )
    # Jobs stored before keep their environment as it was: a task count taken as given.


def downgrade() -> None:
    op.drop_column("jobs", "tasks_given")
    op.drop_column("jobs", "deadline_t_s")
