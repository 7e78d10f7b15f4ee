"""leases and lease_epochs: the active server of a PostgreSQL store, timed by the database's
clock, and every epoch taken (`control.store.lease`). Unused on SQLite (one server).

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("owner", sa.String(300), nullable=False),
        sa.Column("url", sa.String(300), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("acquired_t_s", sa.Float(), nullable=False),
        sa.Column("expires_t_s", sa.Float(), nullable=False),
    )
    op.create_table(
        "lease_epochs",
        sa.Column("epoch", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("owner", sa.String(300), nullable=False),
        sa.Column("acquired_t_s", sa.Float(), nullable=False),
        sa.Column("previous_expires_t_s", sa.Float(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("lease_epochs")
    op.drop_table("leases")
