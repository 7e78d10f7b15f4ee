"""``railyard admin install-service``, ``backup`` and ``restore``: the operator's commands on
this machine (no token: they act on files and the store directly, as the server's account).

- ``install-service`` writes the systemd units shipped in ``railyard/data/systemd`` (the
  control plane, ``railyard.service``; a node, ``railyard-node.service``) with this
  installation's Python filled in;
- ``backup FILE`` copies the store while the server runs: SQLite's online backup API (a
  consistent snapshot, page by page, while writers go on), or ``pg_dump`` for PostgreSQL;
- ``restore FILE`` puts a backup back, refused while a server holds the store (its lock).

The store is found as ``railyard up`` finds it: ``--state-dir``/``--database-url``, else the
configuration file's ``[up]``, else ``$RAILYARD_HOME`` or ``~/.railyard``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from railyard.cli.args import Parser, fail
from railyard.cli.configfile import default_path, load, section_values
from railyard.cli.main import command
from railyard.client.config import default_state_dir

UNITS = ("railyard.service", "railyard-node.service")
UNIT_DIR = Path("etc/systemd/system")
UNIT_SOURCE = Path(__file__).resolve().parent.parent / "data" / "systemd"  # package data
BACKUP_MODE = 0o600  # it holds token hashes and every job's command line


def _which(name: str) -> str | None:
    """``shutil.which`` without importing shutil (and its compression modules) for every
    ``railyard admin`` command."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def unit_text(name: str) -> str:
    """A shipped unit with this installation's interpreter in it."""
    template = (UNIT_SOURCE / name).read_text()
    python = Path(sys.executable)
    return template.replace("@PYTHON@", str(python)).replace("@BINDIR@", str(python.parent))


def install_service(args: argparse.Namespace) -> None:
    """Install the systemd units (railyard.service for `up`, railyard-node.service for `join`).

    Both have Delegate=yes: railyard's cgroups go under the unit's own group. Settings go in
    /etc/railyard/railyard.toml; then `systemctl enable --now railyard` (or railyard-node).
    """
    target = args.root / UNIT_DIR
    for name in UNITS:
        path = target / name
        text = unit_text(name)
        if args.dry_run:
            print(f"# would write {path}\n{text}")
            continue
        try:
            target.mkdir(parents=True, exist_ok=True)
            temp = path.with_name(f".{name}.{os.getpid()}")
            temp.write_text(text)
            temp.chmod(0o644)
            temp.replace(path)
        except OSError as exc:
            fail(f"admin install-service: {path}: {exc.strerror or exc} (hint: run as root, "
                 "or --root DIR)", 1)  # fmt: skip
        print(f"wrote {path}")
    if args.dry_run:
        return
    if args.root == Path("/") and Path("/run/systemd/system").is_dir() and _which("systemctl"):
        subprocess.run(["systemctl", "daemon-reload"], check=False)
    print("next: settings in /etc/railyard/railyard.toml (`railyard config check`), then "
          "`systemctl enable --now railyard` here, `systemctl enable --now railyard-node` on "
          "each node")  # fmt: skip


def install_args(p: Parser) -> None:
    p.add_argument("--dry-run", action="store_true", help="print the units, write nothing")
    p.add_argument(
        "--root", type=Path, default=Path("/"), help="install below DIR (default /: into "
        "/etc/systemd/system)",
    )  # fmt: skip


def _store(args: argparse.Namespace) -> tuple[Path, str | None]:
    """The state directory and database URL `railyard up` would use."""
    state_dir, database_url = args.state_dir, args.database_url
    path = args.config or default_path()
    if path is not None and (state_dir is None or database_url is None):
        data, text = load(path)
        up = section_values(data, text, path, "up", command("up").parser())
        state_dir = state_dir or up.get("state_dir")
        database_url = database_url or up.get("database_url")
    return Path(state_dir or default_state_dir()), database_url


def _libpq_url(database_url: str) -> str:
    """SQLAlchemy's ``postgresql+psycopg://`` as libpq (pg_dump) spells it."""
    scheme, sep, rest = database_url.partition("://")
    return f"{scheme.split('+')[0]}{sep}{rest}"


def _sqlite_copy(source: Path, destination: Path) -> None:
    """``source`` into ``destination`` with SQLite's online backup API."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(destination)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()


def _is_store(path: Path) -> bool:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            found = conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name='alembic_version'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
    return found is not None


def backup(args: argparse.Namespace) -> None:
    """Copy the store to FILE while the server runs (a consistent snapshot), 0600."""
    from railyard.control.store.paths import database_path  # the server's layer, on demand

    state_dir, database_url = _store(args)
    out: Path = args.file
    if out.exists():
        fail(f"admin backup: {out} exists (hint: give a new file name)")
    if database_url and not database_url.startswith("sqlite"):
        pg_dump = _which("pg_dump")
        if pg_dump is None:
            fail("admin backup: the store is PostgreSQL and pg_dump is not installed (hint: "
                 "apt-get install postgresql-client)", 1)  # fmt: skip
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, BACKUP_MODE)
        os.close(fd)
        done = subprocess.run([pg_dump, "--format=custom", "--file", str(out),
                               _libpq_url(database_url)], capture_output=True, text=True,
                              check=False)  # fmt: skip
        if done.returncode != 0:
            out.unlink(missing_ok=True)
            fail(f"admin backup: pg_dump failed: {done.stderr.strip().splitlines()[-1:]}", 1)
        print(f"backed up the PostgreSQL store to {out} (pg_dump custom format)")
        return
    database = Path(database_url.split("///", 1)[1]) if database_url else database_path(state_dir)
    if not _is_store(database):
        fail(f"admin backup: no railyard store at {database} (hint: --state-dir DIR, "
             "--database-url URL or --config FILE)", 1)  # fmt: skip
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, BACKUP_MODE)
    os.close(fd)
    _sqlite_copy(database, out)
    print(f"backed up {database} to {out} ({out.stat().st_size} bytes)")


def restore(args: argparse.Namespace) -> None:
    """Put a backup back into the store; refused while a server runs on it."""
    from railyard.control.store.lock import StoreLock, StoreLocked
    from railyard.control.store.paths import database_path

    state_dir, database_url = _store(args)
    source: Path = args.file
    lock = StoreLock(state_dir, database_url)
    try:
        lock.acquire(f"pid {os.getpid()}, railyard admin restore")
    except StoreLocked as exc:
        fail(f"admin restore: {exc}", 1)
    try:
        if database_url and not database_url.startswith("sqlite"):
            pg_restore = _which("pg_restore")
            if pg_restore is None:
                fail("admin restore: pg_restore is not installed (hint: apt-get install "
                     "postgresql-client)", 1)  # fmt: skip
            done = subprocess.run([pg_restore, "--clean", "--if-exists", "--no-owner",
                                   "--dbname", _libpq_url(database_url), str(source)],
                                  capture_output=True, text=True, check=False)  # fmt: skip
            if done.returncode != 0:
                fail(f"admin restore: pg_restore failed: {done.stderr.strip()[-300:]}", 1)
            print(f"restored {source} into the PostgreSQL store")
            return
        if not _is_store(source):
            fail(f"admin restore: {source} is not a railyard SQLite backup (hint: a file "
                 "`railyard admin backup` wrote)")  # fmt: skip
        database = (Path(database_url.split("///", 1)[1]) if database_url
                    else database_path(state_dir))  # fmt: skip
        _sqlite_copy(source, database)
        os.chmod(database, BACKUP_MODE)
        print(f"restored {source} into {database}; start the server to use it")
    finally:
        lock.release()


def store_args(p: Parser) -> None:
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("--state-dir", type=Path, help="the server's (default: as `railyard up`)")
    p.add_argument("--database-url", help="the server's (default: as `railyard up`)")
    p.add_argument("--config", type=Path, metavar="FILE", help="read [up] from this file")
