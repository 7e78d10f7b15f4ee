"""token expiry (tokens.expires_t_s) and the signal that ended a job (jobs.exit_signal)

Revision ID: 0002_harden
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_harden"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("expires_t_s", sa.Float(), nullable=True))
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("exit_signal", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("exit_signal")
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_column("expires_t_s")
