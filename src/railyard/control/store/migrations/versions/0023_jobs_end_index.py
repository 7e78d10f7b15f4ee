"""jobs.end_t_s indexed: the overview's last six hours, sacct's window and MinJobAge read the
jobs that ended recently; with 100,000 finished jobs a scan of them all took 90 ms a page

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_end_t_s", "jobs", ["end_t_s"])


def downgrade() -> None:
    op.drop_index("ix_jobs_end_t_s", table_name="jobs")
