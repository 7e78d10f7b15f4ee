"""nodes.features: Slurm's node features, from the blueprint (--constraint picks by them)

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("features", sa.JSON(), nullable=True))
    # Written at every start from the blueprint; none before: no constraint matches them.


def downgrade() -> None:
    op.drop_column("nodes", "features")
