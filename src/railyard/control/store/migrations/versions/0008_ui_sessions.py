"""dashboard sessions (ui_sessions): a random id's hash mapped to its user and token

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ui_sessions",
        sa.Column("id_hash", sa.String(length=64), primary_key=True),
        sa.Column(
            "user_id", sa.Integer(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "token_id", sa.Integer(), sa.ForeignKey("tokens.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("created_t_s", sa.Float(), nullable=False),
        sa.Column("last_seen_t_s", sa.Float(), nullable=False),
        sa.Column("expires_t_s", sa.Float(), nullable=False),
    )
    op.create_index("ix_ui_sessions_user_id", "ui_sessions", ["user_id"])
    op.create_index("ix_ui_sessions_token_id", "ui_sessions", ["token_id"])
    op.create_index("ix_ui_sessions_expires_t_s", "ui_sessions", ["expires_t_s"])


def downgrade() -> None:
    op.drop_index("ix_ui_sessions_expires_t_s", "ui_sessions")
    op.drop_index("ix_ui_sessions_token_id", "ui_sessions")
    op.drop_index("ix_ui_sessions_user_id", "ui_sessions")
    op.drop_table("ui_sessions")
