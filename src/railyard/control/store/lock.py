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
- with PostgreSQL, nothing here: the store's lease (`control.store.lease`) decides which
  server of one database is active, with fencing (the session advisory lock it replaced was
  taken once and never checked: a terminated session let a second server schedule beside
  the first). ``--standby`` servers of one machine share the state directory: their lock
  on it is shared (``LOCK_SH``), so they exclude a server without ``--standby`` and a
  SQLite server, not each other.

A refusal is :class:`StoreLocked`, one line naming who holds the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from sqlalchemy.engine import make_url

from railyard.control.store.database import sqlite_url
from railyard.control.store.paths import database_path

LOCK_FILE = "server.lock"


class StoreLocked(Exception):
    """Another server holds this state directory or database."""


class StoreLock:
    """The state directory's file lock, plus SQLite's locks for its database file.

    :meth:`acquire` takes all or none; :meth:`release` (or process exit) gives them back.
    ``owner`` (pid and URL) is written into the lock file, so a refusal can say who holds it.
    ``shared``: a standby of a PostgreSQL store (see the module's docstring).
    """

    def __init__(
        self, state_dir: Path, database_url: str | None = None, *, shared: bool = False
    ) -> None:
        self.path = state_dir / LOCK_FILE
        self.database_url = database_url
        url = database_url or sqlite_url(database_path(state_dir))
        self.database_lock = sqlite_lock_path(url)
        self.shared = shared and self.database_lock is None
        self._fds: list[int] = []

    def acquire(self, owner: str) -> None:
        try:
            self._lock_file(self.path, owner, "state directory", "--state-dir", self.shared)
            if self.database_lock is not None:
                self._lock_file(self.database_lock, owner, "database", "--database-url")
                self._lock_database_file(self.database_lock.with_suffix(""))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        while self._fds:
            os.close(self._fds.pop())  # closing the descriptor drops the flock

    def _lock_file(
        self, path: Path, owner: str, what: str, option: str, shared: bool = False
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_owner(fd)
            os.close(fd)
            where = path.parent if what == "state directory" else path.with_suffix("")
            raise StoreLocked(
                f"{what} {where} is in use by another railyard server"
                f"{f' ({holder})' if holder else ''} (hint: stop it first, or use another "
                f"{option})"
            ) from None
        os.ftruncate(fd, 0)  # shared: the line of the last standby that came, a hint
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
