"""A job's working directory is checked as its account: root's answer told a plain user
whether a path existed under another user's 0700 home (201 against 422 "no directory")."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from tests.integration.tenants import NEEDS_ROOT, unix_accounts

from railyard.control.errors import Invalid
from railyard.control.usecases.admission import _check_workdir
from railyard.control.usecases.workdirs import enters_directory

pytestmark = NEEDS_ROOT


def _home(account: pwd.struct_passwd) -> Path:
    home = Path(account.pw_dir)
    home.chmod(0o700)
    project = home / "project-merger"
    project.mkdir()
    os.chown(project, account.pw_uid, account.pw_gid)
    return home


def test_a_directory_under_another_user_s_home_answers_as_one_that_does_not_exist() -> None:
    with unix_accounts(2) as (alice, bob):
        home = _home(alice)
        there, nowhere = str(home / "project-merger"), str(home / "project-none")
        assert enters_directory(alice, there)
        assert not enters_directory(alice, nowhere)
        assert enters_directory(bob, "/tmp")
        assert (enters_directory(bob, there), enters_directory(bob, nowhere)) == (False, False)
        refusals = []
        for path in (there, nowhere):
            with pytest.raises(Invalid) as refused:
                _check_workdir(path, bob)
            refusals.append(str(refused.value).replace(path, "PATH"))
        assert refusals[0] == refusals[1]
        assert f"Unix account {bob.pw_name!r} can enter" in refusals[0]
        _check_workdir(there, alice)  # her own: fine
        assert enters_directory(None, there)  # this process (root) still sees it


def test_a_directory_without_search_permission_is_refused_to_its_group() -> None:
    with unix_accounts(2) as (alice, bob):
        Path(alice.pw_dir).chmod(0o755)
        modes = {"enter": 0o750, "list": 0o740}  # list, not enter: `cd` fails, so does the job
        for name, mode in modes.items():
            shared = Path(alice.pw_dir) / name
            shared.mkdir(mode=mode)
            os.chown(shared, alice.pw_uid, bob.pw_gid)  # bob's group
            shared.chmod(mode)
        home = alice.pw_dir
        assert [enters_directory(bob, f"{home}/{name}") for name in modes] == [True, False]
