"""Opening the store: SQLite by default (no set-up), PostgreSQL with a URL; always migrated.

Migrations are Alembic revisions shipped in the package, applied on every start, so an
upgrade of railyard brings the schema forward without losing rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = "railyard.control:migrations"
# How long a SQLite writer waits for another's lock before "database is locked"; transactions
# are short (bulk statements), so this is only reached when the store is wedged.
BUSY_TIMEOUT_S = 5.0


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL lets the API read while the service loop writes; foreign keys are off by default."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    cursor.close()


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite connections get the pragmas above."""
    if url.startswith("sqlite"):
        connect = {"check_same_thread": False, "timeout": BUSY_TIMEOUT_S}
        engine = create_engine(url, connect_args=connect)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    return config


def migrate(engine: Engine) -> str:
    """Bring the schema to the newest revision; return that revision."""
    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return head_revision()


def head_revision() -> str:
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


class Store:
    """The engine and a session factory; ``session()`` commits on success, rolls back on error.

    ``session(write=True)`` is for a transaction that reads and then writes (an API request that
    changes rows): on SQLite it starts with ``BEGIN IMMEDIATE``, so it waits for the write lock
    up front (under ``busy_timeout``) and what it read stays true until it commits. A deferred
    transaction that read first could not take the lock after another writer committed
    (``SQLITE_BUSY_SNAPSHOT``, which no busy timeout waits out). Without ``write``, pysqlite
    begins at the first write, as before: reads run outside it and never hold the lock.
    PostgreSQL needs neither: its row locks and compare-and-set ``UPDATE``s keep this order.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        migrate(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def session(self, *, write: bool = False) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            if write and self.is_sqlite:
                session.connection().exec_driver_sql("BEGIN IMMEDIATE")
            yield session

    def close(self) -> None:
        self.engine.dispose()
