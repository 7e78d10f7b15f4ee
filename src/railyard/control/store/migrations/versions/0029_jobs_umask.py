"""jobs.umask: the submitter's umask (``railyard submit`` sends it, as sbatch's
``SLURM_UMASK``), which the job's processes and their output files get; NULL for the jobs
submitted before, and for an API client that sends none: 0022, Slurm's default. The change
triggers of 0028 are made again so the new column counts as a change like every other.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

# Written here, not imported: a migration must not change when later code does (0028's).
UNTRACKED = ("reason", "change_seq")
BUMP = "UPDATE counters SET value = value + 1 WHERE name = 'job_changes'"
STAMP = (
    "UPDATE jobs SET change_seq = "
    "coalesce((SELECT value FROM counters WHERE name = 'job_changes'), 0) WHERE rowid = NEW.rowid"
)


def _tracked() -> str:
    columns = sa.inspect(op.get_bind()).get_columns("jobs")
    return ", ".join(c["name"] for c in columns if c["name"] not in UNTRACKED)


def _postgresql() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def _drop_update_trigger() -> None:
    if _postgresql():
        op.execute("DROP TRIGGER jobs_changed ON jobs")
    else:
        op.execute("DROP TRIGGER jobs_changed_update")


def _create_update_trigger() -> None:
    """0028's update trigger over the columns ``jobs`` has now."""
    tracked = _tracked()
    if _postgresql():
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
    op.add_column("jobs", sa.Column("umask", sa.Integer(), nullable=True))
    _drop_update_trigger()
    _create_update_trigger()


def downgrade() -> None:
    _drop_update_trigger()
    op.drop_column("jobs", "umask")
    _create_update_trigger()
