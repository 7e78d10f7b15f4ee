"""jobs.only_nodes, jobs.never_nodes: sbatch's --nodelist and --exclude, expanded

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("only_nodes", sa.JSON(), nullable=True))
    op.add_column("jobs", sa.Column("never_nodes", sa.JSON(), nullable=True))
    # Jobs stored before name no nodes: placed anywhere, as before.


def downgrade() -> None:
    op.drop_column("jobs", "never_nodes")
    op.drop_column("jobs", "only_nodes")
