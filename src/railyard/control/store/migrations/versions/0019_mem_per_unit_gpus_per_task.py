"""jobs.mem_per_cpu_mb, mem_per_gpu_mb, gpus_per_task: sbatch's --mem-per-cpu/--mem-per-gpu
as asked, and --gpus-per-task (each task sees its own GPUs)

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # What the job's environment says (SLURM_MEM_PER_CPU / _GPU); the booking is per node.
    op.add_column("jobs", sa.Column("mem_per_cpu_mb", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("mem_per_gpu_mb", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("gpus_per_task", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "gpus_per_task")
    op.drop_column("jobs", "mem_per_gpu_mb")
    op.drop_column("jobs", "mem_per_cpu_mb")
