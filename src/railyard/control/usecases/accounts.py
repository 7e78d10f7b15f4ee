"""Which Unix accounts this control plane can run jobs as, checked at submit.

Run as root, railyard is **multi-user**: each job runs as its user's Unix account
(``users.unix_user``), which must exist on this machine, as slurmd runs each job as its
submitter. Run as anyone else it is **single-user**: it can only start processes as itself, so
it accepts only jobs of users mapped to its own account and refuses the others at submit, with
a one-line error, instead of running them under the wrong identity. The executor checks again
at launch (:func:`railyard.exec.task.identity.resolve`).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

from railyard.control.errors import Forbidden, Invalid
from railyard.exec.task.identity import Account


@dataclass(frozen=True)
class RunAs:
    """The server's own account, whether it may switch to others (root), and what the site
    lets its jobs' containers pull."""

    server_account: str
    multi_user: bool
    unreachable_spool: str | None = None  # why job users cannot reach the spool, if they cannot
    # the registries containers may pull from (`railyard up --container-registry`); none: the
    # nodes' own images only (`railyard.exec.containers.container.may_pull`)
    container_registries: tuple[str, ...] = ()

    @classmethod
    def this_process(cls) -> RunAs:
        return cls(Account.current().name, os.geteuid() == 0)

    def check(self, user: str, unix_user: str, *, is_admin: bool = False) -> None:
        """Refuse a job of ``user`` (mapped to ``unix_user``) this server cannot run, and, in
        multi-user mode, a plain user's job as uid 0 (a user named after a root account gets
        it by default): only an admin's jobs run as root, and only by its explicit mapping."""
        if self.multi_user:
            entry = self.account(user, unix_user)
            if entry.pw_uid != 0 and self.unreachable_spool:
                raise Forbidden(
                    f"user {user!r} (Unix account {unix_user!r}): {self.unreachable_spool}"
                )
            if entry.pw_uid == 0 and not is_admin:
                raise Forbidden(
                    f"user {user!r} maps to Unix account {unix_user!r} (uid 0); only an "
                    "admin's jobs may run as root",
                    hint=f"map the user to its own account: railyard admin users update {user} "
                    "--unix-user ACCOUNT",
                )
        elif unix_user != self.server_account:
            raise Forbidden(
                f"single-user mode: this server runs as {self.server_account!r} and runs only "
                f"jobs of users mapped to that account; user {user!r} maps to {unix_user!r}",
                hint="start `railyard up` as root to run jobs as their users' accounts",
            )

    def account(self, user: str, unix_user: str) -> pwd.struct_passwd:
        """``unix_user``'s entry; Invalid naming the fix when this machine has no such account."""
        try:
            return pwd.getpwnam(unix_user)
        except KeyError:
            raise Invalid(
                "unix_user",
                f"user {user!r} maps to Unix account {unix_user!r}, which does not exist "
                "on this machine",
                f"create it (useradd {unix_user}), or map the user to an existing account: "
                f"railyard admin users update {user} --unix-user ACCOUNT",
            ) from None

    def require_account(self, user: str, unix_user: str) -> None:
        """Multi-user mode: refuse, when an admin adds or changes a user, an account this
        machine lacks (said then, not at the user's first submit)."""
        if self.multi_user:
            self.account(user, unix_user)

    def describe(self) -> str:
        """How ``railyard up`` says which mode it is in."""
        if self.multi_user:
            return "multi-user mode: jobs run as their users' Unix accounts"
        return (
            f"single-user mode: runs only jobs of users mapped to Unix account "
            f"{self.server_account!r} (start as root for multi-user mode)"
        )
