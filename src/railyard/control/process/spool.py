"""The server's own directories: the state directory (the store, the admin's client file:
root's alone) and the spool (job files: job users pass through it, nobody lists it), claimed
by one state directory, and checked that job users can reach it."""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from dataclasses import replace
from pathlib import Path

from sqlalchemy import select

from railyard.control.store.database import Store
from railyard.control.store.paths import (
    SECRET_FILE_MODE,
    SPOOL_DIR_MODE,
    STATE_DIR_MODE,
    database_path,
    spool_owner_path,
)
from railyard.control.store.tables import User
from railyard.control.usecases.accounts import RunAs


class SpoolTaken(Exception):
    """The spool directory serves another state directory; one line for the CLI."""


def claim_spool(spool_dir: Path, state_dir: Path) -> None:
    """Create the spool (0711: job users pass through, nobody lists) and mark it as this state
    directory's; refuse one that serves another (its job ids would collide with ours)."""
    spool_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(spool_dir, SPOOL_DIR_MODE)
    marker = spool_owner_path(spool_dir)
    mine = str(state_dir.resolve())
    try:
        owner = marker.read_text().strip()
    except FileNotFoundError:
        marker.write_text(mine + "\n")
        return
    if owner != mine:
        raise SpoolTaken(
            f"spool directory {spool_dir} holds the jobs of state directory {owner} "
            f"(hint: give this one its own: railyard up --spool-dir DIR)"
        )


def unreachable_spool(spool_dir: Path) -> str | None:
    """Why job users cannot reach the spool (a directory above it others may not pass, such
    as the state directory, 0700), or None: their jobs need their files there
    (``$RAILYARD_CHECKPOINT_DIR``)."""
    for level in spool_dir.resolve().parents:
        mode = level.stat().st_mode
        if not mode & stat.S_IXOTH:
            return (
                f"--spool-dir: job users cannot reach {spool_dir}: {level} is mode "
                f"{stat.S_IMODE(mode):04o} (hint: a spool outside the state directory whose "
                "parents others may pass through (o+x), such as /var/spool/railyard)"
            )
    return None


def check_spool_reach(store: Store, spool_dir: Path, run_as: RunAs) -> RunAs:
    """Multi-user mode: refuse a spool job users cannot reach when users map to accounts
    other than root; with none yet, start, and refuse each such job at submit instead."""
    why = unreachable_spool(spool_dir) if run_as.multi_user else None
    if why is None:
        return run_as
    with store.session() as s:
        accounts = set(s.scalars(select(User.unix_user)))
    for name in accounts:
        with contextlib.suppress(KeyError):
            if pwd.getpwnam(name).pw_uid != 0:
                raise SpoolTaken(why)
    print(f"railyard up: only root's jobs can run: {why}", flush=True)
    return replace(run_as, unreachable_spool=why)


def secure_state_dir(state_dir: Path) -> None:
    """The state directory (0700) and the store files in it (0600): the server's alone."""
    state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(state_dir, STATE_DIR_MODE)
    db = database_path(state_dir)
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        if path.exists():
            os.chmod(path, SECRET_FILE_MODE)
