"""The Alembic revisions build exactly the schema ``tables.py`` declares, on both stores; the
revisions railyard reads without alembic are the ones alembic reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from railyard.control.store import database
from railyard.control.store.database import (
    Store,
    _alembic_head,
    current_revision,
    head_revision,
    sqlite_url,
)
from railyard.control.store.tables import Base

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier


def test_migrations_match_the_tables(store: Store) -> None:
    assert current_revision(store.engine) == head_revision()
    with store.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_the_revisions_read_without_alembic_are_alembics(store: Store) -> None:
    """`head_revision` and `current_revision` read the files and the table themselves, so a
    store at the newest revision opens without importing alembic: they must say what it says."""
    assert head_revision() == _alembic_head()
    with store.engine.connect() as connection:
        assert (
            current_revision(store.engine)
            == MigrationContext.configure(connection).get_current_revision()
        )


def test_revision_files_read_otherwise_go_to_alembic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two heads (a branch not yet merged) are not the simple chain the lines describe."""
    for name, revision, parent in [("0001_a", "0001", None), ("0002_b", "0002", "0001"),
                                   ("0003_c", "0003", "0001")]:  # fmt: skip
        down = f'"{parent}"' if parent else "None"
        (tmp_path / f"{name}.py").write_text(f'revision = "{revision}"\ndown_revision = {down}\n')
    monkeypatch.setattr(database, "VERSIONS_DIR", tmp_path)
    monkeypatch.setattr(database, "_alembic_head", lambda: "alembic's answer")
    assert head_revision.__wrapped__() == "alembic's answer"
    (tmp_path / "0003_c.py").unlink()
    assert head_revision.__wrapped__() == "0002"


def test_a_store_at_the_newest_revision_opens_without_alembic(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "railyard.db")
    Store(url).close()  # made and migrated here
    probe = (
        "import sys; from railyard.control.store.database import Store; "
        f"Store({url!r}).close(); print(sorted(m for m in sys.modules if m.startswith('alembic')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"
