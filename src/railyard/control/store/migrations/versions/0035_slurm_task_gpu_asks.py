"""jobs.ntasks_alone: --ntasks was asked without --ntasks-per-node (sbatch and srun then leave
SLURM_NTASKS_PER_NODE unset); jobs.gpus_per_node_asked: --gpus-per-node as given, which sbatch
exports as SLURM_GPUS_PER_NODE (--gres=gpu:N sets none).

Jobs stored before keep their environment as it was: no task count taken as asked alone, and
GPUs per node on distinct nodes taken as --gpus-per-node. The change triggers of 0028 name
every tracked column, so they are made again with these.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None

# Written here, not imported: a migration must not change when later code does (as 0028's).
UNTRACKED = ("reason", "change_seq")
BUMP = "UPDATE counters SET value = value + 1 WHERE name = 'job_changes'"
STAMP = (
    "UPDATE jobs SET change_seq = "
    "coalesce((SELECT value FROM counters WHERE name = 'job_changes'), 0) WHERE rowid = NEW.rowid"
)
# What the launch set SLURM_GPUS_PER_NODE from before this revision.
BACKFILL = (
    "UPDATE jobs SET gpus_per_node_asked = CAST(gpus_per_worker AS VARCHAR(16)) "
    "WHERE distinct_nodes AND gpus_per_worker > 0"
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
    _drop_update_trigger()  # the backfill below changes nothing a watcher must see
    op.add_column(
        "jobs", sa.Column("ntasks_alone", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.add_column("jobs", sa.Column("gpus_per_node_asked", sa.String(80), nullable=True))
    op.execute(BACKFILL)
    _create_update_trigger()


def downgrade() -> None:
    _drop_update_trigger()  # it names the columns
    op.drop_column("jobs", "gpus_per_node_asked")
    op.drop_column("jobs", "ntasks_alone")
    _create_update_trigger()
