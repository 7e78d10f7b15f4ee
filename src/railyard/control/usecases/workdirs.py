"""Whether a job's working directory is one its account can enter, asked as that account.

The server runs as root in multi-user mode. Asked with root's rights, "is there a directory
here?" answered for paths the job's user cannot see: a plain user learned whether
``/home/alice/project-x`` exists under alice's 0700 home from 201 against 422. So the
question goes to the kernel as the account the job will run as (`test -d P -a -x P` in a
child with that uid, gid and groups: ACLs and every mode bit on the way included), and the
answer is the one that account would get from `cd`.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time

CHECK_TIMEOUT_S = 10.0  # a hung network mount must not hold a submit for ever
_KEPT_S = 2.0  # a batch of 1,000 jobs in one directory forks once, not 1,000 times
_KEPT_MAX = 1024
_kept: dict[tuple[int, int, str], float] = {}  # a "yes" and when it was given; never a "no",
# so a directory made just after a refusal is seen at the next submit


def enters_directory(account: pwd.struct_passwd | None, path: str) -> bool:
    """Whether ``account`` (None: this process's) can ``cd`` into ``path``."""
    if account is None or account.pw_uid == os.geteuid():
        return os.path.isdir(path) and os.access(path, os.X_OK)
    key = (account.pw_uid, account.pw_gid, path)
    now = time.monotonic()
    if now - _kept.get(key, -_KEPT_S) < _KEPT_S:
        return True
    if not _ask_as(account, path):
        return False
    if len(_kept) >= _KEPT_MAX:
        _kept.clear()
    _kept[key] = now
    return True


def _ask_as(account: pwd.struct_passwd, path: str) -> bool:
    test = shutil.which("test", path="/usr/bin:/bin")
    if test is None:  # coreutils is part of every system this runs on; refuse if not
        return False
    try:
        done = subprocess.run(
            [test, "-d", path, "-a", "-x", path],
            user=account.pw_uid,
            group=account.pw_gid,
            extra_groups=os.getgrouplist(account.pw_name, account.pw_gid),
            env={},
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
