"""A venv only root can read breaks every job user's srun, ssh and container steps: `railyard
up` says so at start, naming the account, the path in the way and the fix (issue 58, item 4).
The server runs from a venv reached through a 0700 directory of root's, as a clone in /root
would be; the job user is a fresh Unix account."""

from __future__ import annotations

import sys
from pathlib import Path

from railyard.control.usecases.pythonreach import warnings
from tests.integration.server_proc import ServerProcess
from tests.integration.tenants import NEEDS_ROOT, runnable_by, scratch_dir, unix_accounts
from tests.waiting import wait_for

pytestmark = NEEDS_ROOT


def venv_behind_a_private_dir(scratch: Path) -> tuple[Path, str]:
    """This venv, reached through ``scratch/private`` (0700, root's): its interpreter path."""
    private = scratch / "private"
    private.mkdir(mode=0o700)
    (private / "venv").symlink_to(Path(sys.prefix))
    return private, str(private / "venv" / "bin" / Path(sys.executable).name)


def test_up_warns_when_a_job_user_cannot_run_its_python(tmp_path: Path) -> None:
    with unix_accounts(1) as [account], scratch_dir() as scratch:
        private, python = venv_behind_a_private_dir(scratch)
        state = tmp_path / "state"
        state.mkdir()
        server = ServerProcess(state, gpus=1, spool_dir=scratch / "spool", python=python)
        server.start(timeout_s=120)
        try:
            server.request(
                "POST", "/v1/users", json={"name": "carol", "unix_user": account.pw_name}
            )
        finally:
            server.stop()
        log = state / "server.log"
        said = (
            f"railyard up: warning: Unix account {account.pw_name} cannot run railyard's "
            f"Python {python}: {private} is mode 0700"
        )
        assert said not in log.read_text()  # no job user was known at the first start
        server.start(timeout_s=120)
        try:
            wait_for(lambda: said in log.read_text(), 120, log.read_text)
            line = next(x for x in log.read_text().splitlines() if said in x)
            assert "install railyard where job users can read it" in line
        finally:
            server.stop()


def test_the_warning_follows_what_the_account_can_really_run() -> None:
    """Root's and unknown accounts are not probed; a real account is warned about exactly when
    it cannot run this interpreter (here as the machine is: e.g. a pyenv Python in /root)."""
    with unix_accounts(1) as [account]:
        said = warnings([account.pw_name, "root", "no-such-account-x"])
        if runnable_by(account, sys.executable):
            assert said == []
        else:
            assert len(said) == 1
            assert f"Unix account {account.pw_name} cannot run railyard's Python" in said[0]
