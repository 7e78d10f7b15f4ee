"""Alembic environment: migrations run on the connection railyard hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from railyard.control.store.tables import Base

config = context.config
connection: Connection | None = config.attributes.get("connection")
if connection is None:  # pragma: no cover - railyard always passes a connection
    raise RuntimeError("run migrations through railyard.control.store.database.migrate()")
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copy
)
with context.begin_transaction():
    context.run_migrations()
