"""counters['config'] bumped at commit on PostgreSQL: 0026's statement triggers become
deferred per-row constraint triggers (TRUNCATE keeps a statement trigger of its own).

At commit, not at the change: the counter's row lock is then the last lock a transaction
takes, so it closes no deadlock cycle (a loop step that wrote jobs and then a node, against
a drain that wrote a node and then jobs, deadlocked in the soak test when the bump came with
the node's UPDATE). SQLite runs one writer at a time: its triggers stay as they are.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

# Written here, not imported: a migration must not change when later code does.
TABLES = ("queues", "queue_members", "nodes")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"DROP TRIGGER {table}_config ON {table}")
        op.execute(
            f"CREATE CONSTRAINT TRIGGER {table}_config AFTER INSERT OR UPDATE OR DELETE "
            f"ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
            "EXECUTE FUNCTION railyard_bump_config()"
        )
        op.execute(  # constraint triggers see no TRUNCATE
            f"CREATE TRIGGER {table}_config_truncate AFTER TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION railyard_bump_config()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"DROP TRIGGER {table}_config_truncate ON {table}")
        op.execute(f"DROP TRIGGER {table}_config ON {table}")
        op.execute(
            f"CREATE TRIGGER {table}_config AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
            f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION railyard_bump_config()"
        )
