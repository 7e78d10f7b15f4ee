"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "counters",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("t_s", sa.Float(), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_events_t_s"), ["t_s"], unique=False)

    op.create_table(
        "nodes",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("flavor", sa.String(length=64), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("cpu_cores", sa.Integer(), nullable=False),
        sa.Column("mem_gb", sa.Float(), nullable=False),
        sa.Column("path", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=256), nullable=False),
        sa.Column("updated_t_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "queues",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("parent", sa.String(length=128), nullable=True),
        sa.Column("nominal_gpus", sa.JSON(), nullable=False),
        sa.Column("borrowing_limit_gpus", sa.JSON(), nullable=False),
        sa.Column("lending_limit_gpus", sa.JSON(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("created_t_s", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent"],
            ["queues.name"],
        ),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "usage",
        sa.Column("key", sa.String(length=256), nullable=False),
        sa.Column("gpu_s", sa.Float(), nullable=False),
        sa.Column("updated_t_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("created_t_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("queue", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=256), nullable=False),
        sa.Column("command", sa.JSON(), nullable=False),
        sa.Column("script", sa.Text(), nullable=True),
        sa.Column("workdir", sa.String(length=1024), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("flavor", sa.String(length=64), nullable=False),
        sa.Column("workers", sa.Integer(), nullable=False),
        sa.Column("gpus_per_worker", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("preemptible", sa.Boolean(), nullable=False),
        sa.Column("walltime_s", sa.Float(), nullable=True),
        sa.Column("topology_level", sa.String(length=32), nullable=True),
        sa.Column("topology_mode", sa.String(length=16), nullable=True),
        sa.Column("min_runtime_s", sa.Float(), nullable=False),
        sa.Column("checkpoint_grace_s", sa.Float(), nullable=False),
        sa.Column("preempt_signal", sa.String(length=16), nullable=False),
        sa.Column("requeue_on_failure", sa.Boolean(), nullable=False),
        sa.Column("max_restarts", sa.Integer(), nullable=False),
        sa.Column("restart_count", sa.Integer(), nullable=False),
        sa.Column("array_parent", sa.String(length=64), nullable=True),
        sa.Column("array_index", sa.Integer(), nullable=True),
        sa.Column("array_max_running", sa.Integer(), nullable=True),
        sa.Column("submit_t_s", sa.Float(), nullable=False),
        sa.Column("start_t_s", sa.Float(), nullable=True),
        sa.Column("end_t_s", sa.Float(), nullable=True),
        sa.Column("placement", sa.JSON(), nullable=True),
        sa.Column("handle", sa.JSON(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("preempt_for", sa.String(length=64), nullable=True),
        sa.Column("preempt_deadline_t_s", sa.Float(), nullable=True),
        sa.Column("last_checkpoint_t_s", sa.Float(), nullable=True),
        sa.Column("updated_t_s", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["queue"],
            ["queues.name"],
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_array_parent"), ["array_parent"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_number"), ["number"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_queue"), ["queue"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_user_id"), ["user_id"], unique=False)

    op.create_table(
        "queue_members",
        sa.Column("queue", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["queue"], ["queues.name"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("queue", "user_id"),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=128), nullable=False),
        sa.Column("created_t_s", sa.Float(), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tokens_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tokens_user_id"))

    op.drop_table("tokens")
    op.drop_table("queue_members")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_user_id"))
        batch_op.drop_index(batch_op.f("ix_jobs_state"))
        batch_op.drop_index(batch_op.f("ix_jobs_queue"))
        batch_op.drop_index(batch_op.f("ix_jobs_number"))
        batch_op.drop_index(batch_op.f("ix_jobs_array_parent"))

    op.drop_table("jobs")
    op.drop_table("users")
    op.drop_table("usage")
    op.drop_table("queues")
    op.drop_table("nodes")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_t_s"))
        batch_op.drop_index(batch_op.f("ix_events_job_id"))

    op.drop_table("events")
    op.drop_table("counters")
