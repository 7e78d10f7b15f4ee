"""Stores on both databases, and small helpers to seed users, tokens, queues and nodes.

``store`` is parametrized over SQLite (a copy of one migrated file per test) and PostgreSQL
(one fresh database ``railyard_t_<random>`` per test module, emptied between tests), so
parallel runs never share a database. PostgreSQL comes from ``RAILYARD_TEST_PG`` (default:
trust auth on 127.0.0.1:5432, database ``test``); without it the PostgreSQL cases skip, but
with ``CI=true`` they fail: CI must test both. The PostgreSQL copies of a module not marked
``stores`` are in the extended tier (tests/conftest.py).
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.tables import Base, NodeRow, QueueMember, QueueRow, User
from railyard.control.usecases.auth import issue_token

PG_URL = os.environ.get(
    "RAILYARD_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test?connect_timeout=3"
)
BACKENDS = ["sqlite", "postgresql"]
FLAVOR = "H100-SXM-80GB"


def _postgres_missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL is required when CI=true: {reason}")
    pytest.skip(f"PostgreSQL not available: {reason}")


@contextmanager
def fresh_pg_database() -> Iterator[str]:
    """A new, empty PostgreSQL database for one test module or test; dropped afterwards."""
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    name = f"railyard_t_{secrets.token_hex(6)}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        _postgres_missing(str(exc.orig).splitlines()[0] if exc.orig else str(exc))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="module")
def pg_store() -> Iterator[Store]:
    """A fresh, migrated PostgreSQL database for this test module, dropped afterwards."""
    with fresh_pg_database() as url:
        store = Store(url)
        try:
            yield store
        finally:
            store.close()


def _empty(store: Store) -> None:
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with store.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
        # as migration 0026 leaves a new store: the number that shared submit reads go by
        conn.execute(text("INSERT INTO counters (name, value) VALUES ('config', 0)"))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty SQLite store migrated once per test process: a test gets a copy, which opens
    in a third of the CPU time that migrating a fresh file takes."""
    path = tmp_path_factory.mktemp("template") / "railyard.db"
    Store(sqlite_url(path)).close()  # the last connection closed: the WAL is checkpointed
    return path


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> Iterator[Store]:
    """An empty, migrated store on each database."""
    if request.param == "sqlite":
        shutil.copyfile(sqlite_template, tmp_path / "railyard.db")
        sqlite = Store(sqlite_url(tmp_path / "railyard.db"))
        yield sqlite
        sqlite.close()
        return
    pg: Store = request.getfixturevalue("pg_store")
    _empty(pg)
    yield pg


class Seeder:
    """Rows tests need, written straight to the store (no API, no permission checks)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def user(self, name: str, *, admin: bool = False, queues: tuple[str, ...] = ()) -> str:
        """A user with a fresh token (returned) and membership of ``queues``."""
        now = time.time()
        with self.store.session() as session:
            user = User(name=name, is_admin=admin, created_t_s=now)
            session.add(user)
            session.flush()
            for queue in queues:
                session.add(QueueMember(queue=queue, user_id=user.id))
            _, token = issue_token(session, user, "test", now)
        return token

    def queue(self, name: str, *, parent: str | None = None, nominal: int = 8) -> None:
        with self.store.session() as session:
            session.add(
                QueueRow(
                    name=name,
                    parent=parent,
                    nominal_gpus={FLAVOR: nominal} if nominal else {},
                    borrowing_limit_gpus={},
                    lending_limit_gpus={},
                    weight=1.0,
                    created_t_s=time.time(),
                )
            )

    def nodes(self, count: int = 2, gpus: int = 8, flavor: str = FLAVOR) -> None:
        """Nodes ``n01..`` in one leaf group."""
        with self.store.session() as session:
            for i in range(1, count + 1):
                session.add(
                    NodeRow(
                        name=f"n{i:02}",
                        flavor=flavor,
                        gpus=gpus,
                        path=["su1", "su1-lg1"],
                        state="ready",
                        reason="",
                        updated_t_s=time.time(),
                    )
                )

    def cluster(self) -> dict[str, str]:
        """Two 8-GPU nodes, queues ``default`` and ``research``; tokens of an admin (``root``)
        and of users ``alice`` and ``bob`` (members of ``default``)."""
        self.nodes()
        self.queue("default")
        self.queue("research")
        return {
            "root": self.user("root", admin=True),
            "alice": self.user("alice", queues=("default",)),
            "bob": self.user("bob", queues=("default",)),
        }


@pytest.fixture
def seeder(store: Store) -> Seeder:
    return Seeder(store)


@pytest.fixture
def tokens(seeder: Seeder) -> dict[str, str]:
    """The seeded cluster's tokens by user name."""
    return seeder.cluster()
