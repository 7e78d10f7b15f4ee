"""jobs.kill_on_invalid_dep: sbatch --kill-on-invalid-dep=yes, a job cancelled once its
dependency can never be met (it was accepted and ignored: such a job waited, reason
DependencyNeverSatisfied, until cancelled by hand).

Jobs stored before keep waiting as they did. The change triggers of 0028 name every tracked
column, so they are made again with this one.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

# Written here, not imported: a migration must not change when later code does (as 0028's).
UNTRACKED = ("reason", "change_seq")
BUMP = "UPDATE counters SET value = value + 1 WHERE name = 'job_changes'"
STAMP = (
    "UPDATE jobs SET change_seq = "
    "coalesce((SELECT value FROM counters WHERE name = 'job_changes'), 0) WHERE rowid = NEW.rowid"
)


def _drop_update_trigger() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_changed ON jobs")
    else:
        op.execute("DROP TRIGGER jobs_changed_update")


def _create_update_trigger() -> None:
    """0028's update trigger over the columns ``jobs`` has now."""
    columns = sa.inspect(op.get_bind()).get_columns("jobs")
    tracked = ", ".join(c["name"] for c in columns if c["name"] not in UNTRACKED)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE TRIGGER jobs_changed BEFORE INSERT OR UPDATE OF {tracked} ON jobs "
            "FOR EACH ROW EXECUTE FUNCTION railyard_job_changed()"
        )
        return
    op.execute(
        f"CREATE TRIGGER jobs_changed_update AFTER UPDATE OF {tracked} ON jobs "
        f"WHEN NEW.change_seq IS OLD.change_seq BEGIN {BUMP}; {STAMP}; END"
    )


def upgrade() -> None:
    _drop_update_trigger()
    op.add_column(
        "jobs",
        sa.Column("kill_on_invalid_dep", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    _create_update_trigger()


def downgrade() -> None:
    _drop_update_trigger()  # it names the columns
    op.drop_column("jobs", "kill_on_invalid_dep")
    _create_update_trigger()
