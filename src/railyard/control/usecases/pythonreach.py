"""Whether job users can run railyard's own Python: a batch script's ``srun``, ``ssh job-N``,
container steps and task launches run ``<this interpreter> -m railyard...`` as the job's user.
A venv only root can read (a clone in ``/root``, a 0700 home) breaks every such step, and only
at run time, so ``railyard up`` checks the accounts the store knows at start and names the path
that stops them and the fix.

The check is the real thing, ``runuser -u ACCOUNT -- PYTHON -I -c 'import railyard'`` (ACLs,
AppArmor and groups included), bounded to a few accounts; the directory to blame is found from
the permission bits along the path.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import select

import railyard
from railyard.control.store.database import Store
from railyard.control.store.tables import User

PROBE_TIMEOUT_S = 20.0
MAX_ACCOUNTS = 8  # a start-up check, not an audit: the first accounts say it


def runs_python(account: str, python: str = sys.executable) -> bool:
    """``account`` can start ``python`` and import railyard with it."""
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    probe = [runuser, "-u", account, "--", python, "-I", "-c", "import railyard"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return True  # no verdict: say nothing rather than something wrong
    return done.returncode == 0


def _may(info: os.stat_result, entry: pwd.struct_passwd, groups: set[int], bit: int) -> bool:
    """Whether the owner/group/other bits of ``info`` give ``entry`` the permission ``bit``
    (``4`` read, ``1`` execute/search)."""
    if info.st_uid == entry.pw_uid:
        return bool(info.st_mode & (bit << 6))
    if info.st_gid in groups:
        return bool(info.st_mode & (bit << 3))
    return bool(info.st_mode & bit)


def blocking_path(entry: pwd.struct_passwd, paths: Iterable[Path]) -> Path | None:
    """The first directory on the way to ``paths`` that ``entry`` may not pass (or the file
    it may not read), by permission bits; None when the bits allow it all."""
    groups = set(os.getgrouplist(entry.pw_name, entry.pw_gid))
    for path in paths:
        for level in [*reversed(path.parents), path]:
            try:
                info = level.stat()
            except OSError:
                continue
            bit = 1 if stat.S_ISDIR(info.st_mode) or level == path else 4
            if not _may(info, entry, groups, bit):
                return level
    return None


def needed_paths(python: str = sys.executable) -> list[Path]:
    """The interpreter (as named and as resolved) and railyard's package directory."""
    package = Path(railyard.__file__).resolve().parent
    return [Path(python), Path(python).resolve(), package]


def warnings(accounts: Iterable[str], python: str = sys.executable) -> list[str]:
    """One line per account (of the first few non-root ones that exist) that cannot run
    ``python``, naming the path in the way and the fix."""
    lines = []
    checked = 0
    for name in sorted(set(accounts)):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid == 0:
            continue
        checked += 1
        if checked > MAX_ACCOUNTS:
            break
        if runs_python(name, python):
            continue
        blocker = blocking_path(entry, needed_paths(python))
        where = f": {blocker} is mode {stat.S_IMODE(blocker.stat().st_mode):04o}" if blocker else ""
        lines.append(
            f"warning: Unix account {name} cannot run railyard's Python {python}{where}; its "
            "jobs' srun, ssh and container steps will fail (hint: install railyard where job "
            "users can read it, e.g. python3 -m venv /opt/railyard && "
            "/opt/railyard/bin/pip install railyard, and run that one's railyard up)"
        )
    return lines


def store_accounts(store: Store) -> list[str]:
    """The Unix accounts the store's users map to."""
    with store.session() as s:
        return list(s.scalars(select(User.unix_user)))


def warn_in_background(store: Store) -> threading.Thread:
    """Print :func:`warnings` for the store's accounts from a thread: the probes take a
    moment each, and the server need not wait for them to answer."""
    accounts = store_accounts(store)

    def report() -> None:
        for line in warnings(accounts):
            print(f"railyard up: {line}", flush=True)

    thread = threading.Thread(target=report, name="railyard-python-reach", daemon=True)
    thread.start()
    return thread
