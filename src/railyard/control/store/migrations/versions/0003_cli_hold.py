"""jobs.hold: a pending job held by its user or an admin (scontrol hold / release)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("hold", sa.String(length=16), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "hold")
