"""Whose processes a job runs as: a Unix account from the passwd database, and the login
environment that account gets.

slurmstepd runs every task as the submitting user (uid, primary gid, supplementary groups
from ``initgroups``), with HOME, USER, LOGNAME and SHELL of that user; railyard does the same
(:mod:`railyard.exec.task.wrapper` switches in the child, between fork and exec). The login
environment is what ``su - USER`` gives, which is what ``sbatch --export=NONE`` hands a job
(checked with sbatch 22.05 on Debian 12): HOME, LOGNAME, USER, SHELL, MAIL and the PATH of
``/etc/login.defs`` (``ENV_PATH``, or ``ENV_SUPATH`` for root).
"""

from __future__ import annotations

import os
import pwd
import re
from dataclasses import dataclass
from pathlib import Path

from railyard.exec.errors import ExecutorError

TYPE_CHECKING = False  # not typing's: importing typing would cost every rank ~5 ms
if TYPE_CHECKING:
    from typing import Any

LOGIN_DEFS = Path("/etc/login.defs")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
JOB_UMASK = 0o022  # slurmstepd's default when the submitter's umask is unknown
_LOGIN_PATH_RE = re.compile(r"^\s*(ENV_PATH|ENV_SUPATH)\s+(?:PATH=)?(\S+)", re.MULTILINE)


def _refused(message: str) -> Exception:
    """An ExecutorError (`exec.errors`: every rank's wrapper reads its account through this
    module, so the executor protocol stays out of each start-up)."""
    return ExecutorError(message)


def process_umask() -> int:
    """This process's umask, read from /proc (Linux 4.7 on), else set and put back (which
    another thread could see for a moment)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(JOB_UMASK)
    os.umask(mask)
    return mask


@dataclass(frozen=True)
class Account:
    """A Unix account as the passwd database has it."""

    name: str
    uid: int
    gid: int
    home: str
    shell: str

    @classmethod
    def lookup(cls, name: str) -> Account:
        """The account called ``name``; an ExecutorError when this machine has none."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise _refused(f"no Unix account {name!r} on this machine") from None
        return cls._of(entry)

    @classmethod
    def current(cls) -> Account:
        """The account this process runs as (its effective uid)."""
        try:
            return cls._of(pwd.getpwuid(os.geteuid()))
        except KeyError:  # a uid with no passwd entry (some containers)
            uid = os.geteuid()
            return cls(str(uid), uid, os.getegid(), os.environ.get("HOME", "/"), "/bin/sh")

    @classmethod
    def _of(cls, entry: pwd.struct_passwd) -> Account:
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, entry.pw_shell)

    @property
    def is_self(self) -> bool:
        """True when processes can run as this account without switching."""
        return self.uid == os.geteuid()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "uid": self.uid, "gid": self.gid, "home": self.home,
                "shell": self.shell}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Account:
        return cls(str(data["name"]), int(data["uid"]), int(data["gid"]), str(data["home"]),
                   str(data["shell"]))  # fmt: skip


def resolve(user: str | None) -> Account:
    """The account a job runs as: ``user``, or this process's own when None.

    Switching to another account needs root; without it only the executor's own account can
    run jobs (single-user mode), and anything else is refused here, at launch, as a second line
    behind the control plane's check at submit.
    """
    me = Account.current()
    if user is None or user == me.name:
        return me
    account = Account.lookup(user)
    if not account.is_self and os.geteuid() != 0:
        raise _refused(
            f"cannot run as {user!r}: this executor runs as {me.name!r} without root "
            "(single-user mode)"
        )
    return account


def login_path(uid: int, login_defs: Path = LOGIN_DEFS) -> str:
    """PATH a login shell starts with, from ``/etc/login.defs`` when it says."""
    default = DEFAULT_ROOT_PATH if uid == 0 else DEFAULT_PATH
    try:
        text = login_defs.read_text()
    except OSError:
        return default
    found: dict[str, str] = dict(_LOGIN_PATH_RE.findall(text))
    return found.get("ENV_SUPATH" if uid == 0 else "ENV_PATH", default)


def identity_env(account: Account) -> dict[str, str]:
    """The variables that say who the process is; they always follow the account."""
    return {
        "HOME": account.home,
        "USER": account.name,
        "LOGNAME": account.name,
        "SHELL": account.shell or "/bin/sh",
    }


def login_env(account: Account, login_defs: Path = LOGIN_DEFS) -> dict[str, str]:
    """What ``su - USER`` (and so ``sbatch --export=NONE``) starts a job with."""
    return {
        **identity_env(account),
        "MAIL": f"/var/mail/{account.name}",
        "PATH": login_path(account.uid, login_defs),
    }
