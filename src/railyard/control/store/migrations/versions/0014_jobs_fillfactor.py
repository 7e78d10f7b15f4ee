"""PostgreSQL: jobs pages keep 30% free (fillfactor 70), so the loop's updates of a pending
job's reason, which no index covers, are mostly heap-only (HOT): no new entry in each of the
table's seven indexes per row. Updating 9,000 reasons took 125-165 ms, growing with every
turn, and 45 ms with HOT; the live loop's p99 step on 10,000 pending jobs (bench_live,
PostgreSQL) fell from 341 to 233 ms. SQLite has no such setting.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

FILLFACTOR = 70


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE jobs SET (fillfactor = {FILLFACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE jobs RESET (fillfactor)")
