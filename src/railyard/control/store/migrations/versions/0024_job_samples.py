"""job_samples: readings of running jobs' GPUs and host processes, kept for a retention
window (the job page's resource graphs and their export)

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_samples",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("t_s", sa.Float(), nullable=False),
        sa.Column("node", sa.String(64), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=True),
        sa.Column("gpu_util_pct", sa.Float(), nullable=True),
        sa.Column("gpu_mem_used_bytes", sa.Float(), nullable=True),
        sa.Column("gpu_power_w", sa.Float(), nullable=True),
        sa.Column("gpu_temp_c", sa.Float(), nullable=True),
        sa.Column("cpu_pct", sa.Float(), nullable=True),
        sa.Column("host_mem_bytes", sa.Float(), nullable=True),
    )
    op.create_index("ix_job_samples_job_t", "job_samples", ["job_id", "t_s"])
    op.create_index("ix_job_samples_t_s", "job_samples", ["t_s"])


def downgrade() -> None:
    op.drop_table("job_samples")
