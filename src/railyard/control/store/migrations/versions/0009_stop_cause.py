"""stop cause as data: why a started job is being stopped (jobs.stop_cause)

Until now the loop inferred the cause from ``state``, ``reason`` and ``preempt_for``; rows
being stopped when this revision runs are back-filled by that same rule, once.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# (state, condition) -> cause: the inference `control.convert` made before this column
_BACKFILL = (
    ("TimeLimit", "state = 'cancelling' AND reason = 'TimeLimit'"),
    ("Cancelled", "state = 'cancelling' AND reason <> 'TimeLimit'"),
    ("NodeDown", "state = 'preempting' AND preempt_for = 'NodeDown'"),
    ("Preempted", "state = 'preempting' AND (preempt_for IS NULL OR preempt_for <> 'NodeDown')"),
)


def upgrade() -> None:
    op.add_column("jobs", sa.Column("stop_cause", sa.String(length=16), nullable=True))
    for cause, where in _BACKFILL:
        op.execute(sa.text(f"UPDATE jobs SET stop_cause = '{cause}' WHERE {where}"))


def downgrade() -> None:
    op.drop_column("jobs", "stop_cause")
