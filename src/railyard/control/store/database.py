"""Opening the store: SQLite by default (no set-up), PostgreSQL with a URL; always migrated.

Migrations are Alembic revisions shipped in the package, applied on every start, so an
upgrade of railyard brings the schema forward without losing rows.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.orm import Session, sessionmaker

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = "railyard.control.store:migrations"
VERSIONS_DIR = Path(__file__).with_name("migrations") / "versions"
VERSION_TABLE = "alembic_version"  # alembic's, where a store keeps its revision
_REVISION_LINE = re.compile(r'^(revision|down_revision) = "([^"\n]+)"$', re.MULTILINE)
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


_WRITES = ("BEGIN IMMEDIATE", "INSERT", "UPDATE", "DELETE", "REPLACE")
_HOLDS = "railyard_write_gate"  # in a connection's info: it holds its engine's gate


class WriteGate:
    """One SQLite write transaction at a time in this process, queued on a Python lock.

    SQLite's own wait for its write lock is a poll (sleeps of 1 to 100 ms under
    ``busy_timeout``): with 8 clients and the loop writing, a writer can lose every poll to
    the others and wait seconds (p99 over 1 s at a p50 of 10 ms). Here a transaction takes
    the gate at its first write (or ``BEGIN IMMEDIATE``) and gives it back at commit or
    rollback, so waiting writers are woken in turn the moment the lock is free; SQLite's lock
    still guards against other processes. A writer that waits ``BUSY_TIMEOUT_S`` goes on
    without the gate (SQLite's busy timeout then applies): the gate never deadlocks."""

    def __init__(self, engine: Engine) -> None:
        self._lock = threading.Lock()
        event.listen(engine, "before_cursor_execute", self._before)
        for name in ("commit", "rollback"):
            event.listen(engine, name, self._end)
        event.listen(engine.pool, "checkin", self._checkin)

    def _before(self, conn: Connection, _c: Any, sql: str, *_: Any) -> None:
        if not conn.info.get(_HOLDS) and sql.lstrip()[:15].upper().startswith(_WRITES):
            conn.info[_HOLDS] = self._lock.acquire(timeout=BUSY_TIMEOUT_S)

    def _end(self, conn: Connection) -> None:
        if conn.info.pop(_HOLDS, False):
            self._lock.release()

    def _checkin(self, _dbapi: Any, record: Any) -> None:
        """A connection back in the pool (its transaction rolled back there): let go."""
        if record is not None and record.info.pop(_HOLDS, False):
            self._lock.release()


def machine_scope() -> str:
    """Where a pid names one process: this host, boot and pid namespace
    (``host/boot/pidns``; containers sharing a host name keep their own pid namespaces)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()[:6]
        namespace = os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        boot, namespace = "noboot", "nons"
    return f"{socket.gethostname()[:16]}/{boot}/{namespace}"


def process_start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), which
    tells a live process from a later one given the same pid; None: no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_identity() -> str:
    """This process, unique across machines, boots and containers:
    ``host/boot/pidns/pid/start`` (at most 54 characters). A server's lease names it, and
    every PostgreSQL connection carries it (``application_name``), so a takeover can tell a
    dead holder on this machine and end a stale holder's sessions."""
    pid = os.getpid()
    return f"{machine_scope()}/{pid}/{process_start_ticks(pid)}"


def application_name(identity: str | None = None) -> str:
    return f"railyard {identity or process_identity()}"[:63]


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite connections get the pragmas above and a write gate."""
    if url.startswith("sqlite"):
        connect = {"check_same_thread": False, "timeout": BUSY_TIMEOUT_S}
        engine = create_engine(url, connect_args=connect)
        event.listen(engine, "connect", _sqlite_pragmas)
        WriteGate(engine)
        return engine
    # PostgreSQL: each session names this process, so a takeover can end a stale server's
    named = {"application_name": application_name()} if url.startswith("postgres") else {}
    return create_engine(url, pool_pre_ping=True, connect_args=named)


def _alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    return config


def migrate(engine: Engine) -> str:
    """Bring the schema to the newest revision; return that revision. A store already there
    is left to alembic's one-row check: loading every revision file to find nothing to do
    cost 90 ms a store opened (each CLI command, each test's store)."""
    head = head_revision()
    if current_revision(engine) == head:
        return head
    from alembic import command  # a store to migrate: alembic (130 ms to import) only then

    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return head


@cache  # the revision files ship with the code: one read a process
def head_revision() -> str:
    """The newest revision: the one no revision names as its ``down_revision``, read from the
    files' own lines. A store already there needs nothing else from alembic, whose import
    cost every start 130 ms. Files written otherwise (a merge revision names two parents) are
    left to alembic's script directory, which reads them all."""
    revisions: dict[str, str | None] = {}
    for path in sorted(VERSIONS_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        lines = {m[1]: m[2] for m in _REVISION_LINE.finditer(path.read_text())}
        if "revision" not in lines or lines["revision"] in revisions:
            return _alembic_head()
        revisions[lines["revision"]] = lines.get("down_revision")
    heads = set(revisions) - {parent for parent in revisions.values() if parent is not None}
    if len(heads) != 1 or sum(parent is None for parent in revisions.values()) != 1:
        return _alembic_head()
    return heads.pop()


def _alembic_head() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The store's revision: its one row in alembic's table, or None for a new store. A table
    with several rows (heads) is alembic's to read, and to refuse."""
    with engine.connect() as connection:
        if not inspect(connection).has_table(VERSION_TABLE):
            return None
        rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
        if len(rows) <= 1:
            return str(rows[0][0]) if rows else None
        from alembic.runtime.migration import MigrationContext

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

    def fence_with(self, check: Callable[[Session], None]) -> None:
        """Run ``check`` in every session's transaction just before it commits; what it
        raises rolls the transaction back (`control.store.lease`: a stale server's writes)."""
        event.listen(self._sessions, "before_commit", check)

    def close(self) -> None:
        self.engine.dispose()
