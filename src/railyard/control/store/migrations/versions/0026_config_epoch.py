"""counters['config']: a number the store bumps (triggers) whenever the queues, their
members or the nodes change, so a submit can keep what it read of them across transactions
while the number stays the same (``store.sharedreads``)

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

# Written here, not imported: a migration must not change when later code does.
TABLES = ("queues", "queue_members", "nodes")
BUMP = "UPDATE counters SET value = value + 1 WHERE name = 'config'"


def upgrade() -> None:
    op.execute("INSERT INTO counters (name, value) VALUES ('config', 0)")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION railyard_bump_config() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN {BUMP}; RETURN NULL; END $$"
        )
        for table in TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_config AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION railyard_bump_config()"
            )
        return
    for table in TABLES:
        for change in ("INSERT", "UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_config_{change.lower()} AFTER {change} ON {table} "
                f"BEGIN {BUMP}; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER {table}_config ON {table}")
        op.execute("DROP FUNCTION railyard_bump_config()")
    else:
        for table in TABLES:
            for change in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER {table}_config_{change}")
    op.execute("DELETE FROM counters WHERE name = 'config'")
