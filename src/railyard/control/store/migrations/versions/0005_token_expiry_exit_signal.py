"""token expiry (tokens.expires_t_s) and the signal that ended a job (jobs.exit_signal)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (nullable, no default): no table rebuild, which SQLite cannot do for
    # ``users``/``jobs`` while other tables' foreign keys point at them.
    op.add_column("tokens", sa.Column("expires_t_s", sa.Float(), nullable=True))
    op.add_column("jobs", sa.Column("exit_signal", sa.String(length=16), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "exit_signal")
    op.drop_column("tokens", "expires_t_s")
