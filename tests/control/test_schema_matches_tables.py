"""The Alembic revisions build exactly the schema ``tables.py`` declares, on both stores."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from railyard.control.store.database import Store, current_revision, head_revision
from railyard.control.store.tables import Base

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier


def test_migrations_match_the_tables(store: Store) -> None:
    assert current_revision(store.engine) == head_revision()
    with store.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []
