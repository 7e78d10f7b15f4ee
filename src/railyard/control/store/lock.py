"""One server per store: an exclusive lock taken before anything is written or launched.

Two schedulers on one store would both start the same pending jobs. ``railyard up`` therefore
holds, for its whole life:

- a ``flock`` on ``<state_dir>/server.lock`` (always: job directories live there). The kernel
  drops it when the process ends, even by ``kill -9``; job processes do not inherit it (file
  descriptors are not inheritable by default, PEP 446);
- with SQLite, a ``flock`` on ``<database>.lock`` beside the database file itself, its path
  resolved (relative to the working directory, symlinks followed), so two servers reach one
  database by no spelling of its path or URL (``--state-dir B --database-url
  sqlite:///A/railyard.db`` beside the server of ``A`` is refused), and a ``flock`` on the
  database file itself, which the kernel keys by the file (device and inode), not by its
  name: a hard link, a bind mount or any other path to the same file meets the same lock.
  SQLite locks with ``fcntl`` byte ranges, which ``flock`` does not touch on Linux; the
  descriptor stays open until the server ends (closing a descriptor of the file would drop
  this process's ``fcntl`` locks on it, SQLite's included);
- with PostgreSQL, a session-level advisory lock (``pg_try_advisory_lock``) on a connection of
  its own, so servers on different machines sharing one database exclude each other too.
  PostgreSQL drops it when that connection closes.

A refusal is :class:`StoreLocked`, one line naming who holds the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from railyard.control.store.database import sqlite_url
from railyard.control.store.paths import database_path

LOCK_FILE = "server.lock"
# pg_try_advisory_lock(bigint) key: "railyard" in ASCII, so it reads in pg_locks' classid/objid.
PG_LOCK_KEY = int.from_bytes(b"railyard", "big") & 0x7FFF_FFFF_FFFF_FFFF


class StoreLocked(Exception):
    """Another server holds this state directory or database."""


class StoreLock:
    """The state directory's file lock, plus PostgreSQL's advisory lock for ``database_url``.

    :meth:`acquire` takes both or neither; :meth:`release` (or process exit) gives them back.
    ``owner`` (pid and URL) is written into the lock file and the PostgreSQL connection's
    ``application_name``, so a refusal can say who holds the lock.
    """

    def __init__(self, state_dir: Path, database_url: str | None = None) -> None:
        self.path = state_dir / LOCK_FILE
        self.database_url = database_url
        url = database_url or sqlite_url(database_path(state_dir))
        self.database_lock = sqlite_lock_path(url)
        self._fds: list[int] = []
        self._pg: Any = None  # a SQLAlchemy Connection held open while locked

    def acquire(self, owner: str) -> None:
        try:
            self._lock_file(self.path, owner, "state directory", "--state-dir")
            if self.database_lock is not None:
                self._lock_file(self.database_lock, owner, "database", "--database-url")
                self._lock_database_file(self.database_lock.with_suffix(""))
            elif self.database_url:
                self._lock_postgres(owner)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        if self._pg is not None:
            with contextlib.suppress(Exception):  # the connection may be gone already
                self._pg.close()
            self._pg = None
        while self._fds:
            os.close(self._fds.pop())  # closing the descriptor drops the flock

    def _lock_file(self, path: Path, owner: str, what: str, option: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_owner(fd)
            os.close(fd)
            where = path.parent if what == "state directory" else path.with_suffix("")
            raise StoreLocked(
                f"{what} {where} is in use by another railyard server"
                f"{f' ({holder})' if holder else ''} (hint: stop it first, or use another "
                f"{option})"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"owner": owner}).encode())
        self._fds.append(fd)

    def _lock_database_file(self, database: Path) -> None:
        """``flock`` the SQLite file itself (made empty, 0600, when missing: SQLite takes an
        empty file for a new database), so whatever name reaches it meets this lock."""
        fd = os.open(database, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLocked(
                f"database {database} is in use by another railyard server, which reaches the "
                "same file by another name (a hard link or a bind mount) (hint: stop it first, "
                "or use another --database-url)"
            ) from None
        self._fds.append(fd)

    def _lock_postgres(self, owner: str) -> None:
        # NullPool: closing the connection really closes it, which is what releases the lock.
        engine = create_engine(
            self.database_url or "",
            poolclass=NullPool,
            connect_args={"application_name": f"railyard {owner}"[:63]},
        )
        connection = engine.connect()
        got = connection.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": PG_LOCK_KEY})
        if not got.scalar_one():
            holder = connection.execute(
                text(
                    "SELECT a.application_name FROM pg_locks l "
                    "JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND a.pid <> pg_backend_pid() "
                    "AND l.database = (SELECT oid FROM pg_database "
                    "WHERE datname = current_database())"
                )
            ).scalar()
            connection.close()
            where = engine.url.render_as_string(hide_password=True)
            raise StoreLocked(
                f"database {where} is in use by another railyard server"
                f"{f' ({holder})' if holder else ''} (hint: stop it first)"
            )
        connection.commit()  # end the implicit transaction; the session lock stays
        self._pg = connection


def sqlite_lock_path(url: str) -> Path | None:
    """``<database>.lock`` beside a SQLite URL's file, its path resolved; None for another
    database (or SQLite in memory, which no second process can reach)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    if not parsed.database or parsed.database == ":memory:":
        return None
    database = Path(parsed.database).resolve()
    return database.with_name(database.name + ".lock")


def _read_owner(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return ""
    return str(data.get("owner", "")) if isinstance(data, dict) else ""
