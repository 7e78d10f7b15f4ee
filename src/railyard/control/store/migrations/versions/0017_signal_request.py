"""jobs.signal_request: a signal its user asked for (scancel --signal), until the loop sends it

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("signal_request", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "signal_request")
