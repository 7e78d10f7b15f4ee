"""jobs.change_seq: a number the store sets (triggers) on every insert and every update of a
job row but the loop's own reason of a pending job, ordered as the writes commit, so the
scheduler loop reads only the rows that changed since its last step (``store.jobchanges``)

PostgreSQL: the writing transaction's id (``pg_current_xact_id()``, 64 bits, never wraps).
SQLite runs one writer at a time: ``counters['job_changes']``, bumped per row, is the number.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

# Written here, not imported: a migration must not change when later code does.
UNTRACKED = ("reason", "change_seq")  # the loop's reasons are not changes to the job
BUMP = "UPDATE counters SET value = value + 1 WHERE name = 'job_changes'"
STAMP = (  # 0 in a store whose counter row was deleted by hand: its reader reads everything
    "UPDATE jobs SET change_seq = "
    "coalesce((SELECT value FROM counters WHERE name = 'job_changes'), 0) WHERE rowid = NEW.rowid"
)


def _tracked() -> str:
    """Every column of ``jobs`` as it stands at this revision, but the untracked ones (a later
    revision that adds a column adds it to the triggers; tests/control/test_job_changes.py
    updates each column and fails on one left out)."""
    columns = sa.inspect(op.get_bind()).get_columns("jobs")
    return ", ".join(c["name"] for c in columns if c["name"] not in UNTRACKED)


def upgrade() -> None:
    tracked = _tracked()
    op.add_column(
        "jobs", sa.Column("change_seq", sa.BigInteger(), nullable=False, server_default="0")
    )
    op.create_index("ix_jobs_change_seq", "jobs", ["change_seq"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION railyard_job_changed() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN NEW.change_seq := pg_current_xact_id()::text::bigint; RETURN NEW; END $$"
        )
        op.execute(
            f"CREATE TRIGGER jobs_changed BEFORE INSERT OR UPDATE OF {tracked} ON jobs "
            "FOR EACH ROW EXECUTE FUNCTION railyard_job_changed()"
        )
        return
    op.execute("INSERT INTO counters (name, value) VALUES ('job_changes', 0)")
    # Only rows their statement did not number: a bulk statement bumps the counter once and
    # numbers its rows itself (an insert copying a row numbered in its transaction, an update
    # setting change_seq), which spares SQLite a second write of each row.
    op.execute(
        "CREATE TRIGGER jobs_changed_insert AFTER INSERT ON jobs "
        f"WHEN NEW.change_seq = 0 BEGIN {BUMP}; {STAMP}; END"
    )
    op.execute(
        f"CREATE TRIGGER jobs_changed_update AFTER UPDATE OF {tracked} ON jobs "
        f"WHEN NEW.change_seq IS OLD.change_seq BEGIN {BUMP}; {STAMP}; END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_changed ON jobs")
        op.execute("DROP FUNCTION railyard_job_changed()")
    else:
        op.execute("DROP TRIGGER jobs_changed_update")
        op.execute("DROP TRIGGER jobs_changed_insert")
        op.execute("DELETE FROM counters WHERE name = 'job_changes'")
    op.drop_index("ix_jobs_change_seq", table_name="jobs")
    op.drop_column("jobs", "change_seq")
