"""node health: results of each check run (health_results) and each node's last verdict

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "health_results",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("node", sa.String(length=128), nullable=False),
        sa.Column("t_s", sa.Float(), nullable=False),
        sa.Column("check", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("fatal", sa.Boolean(), nullable=False),
        sa.Column("measured", sa.Float(), nullable=True),
        sa.Column("expected", sa.Float(), nullable=True),
        sa.Column("unit", sa.String(length=32), nullable=False),
        sa.Column("fail_below", sa.Float(), nullable=True),
        sa.Column("warn_below", sa.Float(), nullable=True),
        sa.Column("source", sa.String(length=256), nullable=False),
        sa.Column("detail", sa.String(length=512), nullable=False),
        sa.Column("reporter", sa.String(length=64), nullable=False),
    )
    op.create_index("ix_health_results_run_id", "health_results", ["run_id"])
    op.create_index("ix_health_results_node", "health_results", ["node"])
    op.create_index("ix_health_results_t_s", "health_results", ["t_s"])
    # plain ADD COLUMN (nullable): no table rebuild
    op.add_column("nodes", sa.Column("health", sa.String(length=8), nullable=True))
    op.add_column("nodes", sa.Column("health_t_s", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("nodes", "health_t_s")
    op.drop_column("nodes", "health")
    op.drop_index("ix_health_results_t_s", "health_results")
    op.drop_index("ix_health_results_node", "health_results")
    op.drop_index("ix_health_results_run_id", "health_results")
    op.drop_table("health_results")
