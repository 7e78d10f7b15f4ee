"""Two Unix accounts and a root `railyard up` serving both: what the isolation and security
tests share. The accounts are created with useradd and removed afterwards; every attack in
tests/security is made from the attacker's own account (its shell through runuser, its jobs
through the API with its own token)."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.server_proc import ServerProcess
from tests.waiting import waiter

NEEDS_ROOT = [
    pytest.mark.skipif(
        os.geteuid() != 0, reason="needs root: creates Unix users and runs jobs as them"
    ),
    pytest.mark.skipif(shutil.which("useradd") is None, reason="needs useradd"),
]


wait = waiter(90.0)  # a loaded machine (two test workers) starts jobs slowly


@contextmanager
def unix_accounts(count: int = 2) -> Iterator[list[pwd.struct_passwd]]:
    """``count`` fresh Unix accounts with homes, removed afterwards."""
    suffix = secrets.token_hex(3)
    names = [f"ry{chr(ord('a') + i)}{suffix}" for i in range(count)]
    try:
        for name in names:
            subprocess.run(["useradd", "--create-home", name], check=True, capture_output=True)
        yield [pwd.getpwnam(name) for name in names]
    finally:
        for name in names:
            subprocess.run(["pkill", "-KILL", "-u", name], check=False, capture_output=True)
            subprocess.run(["userdel", "--remove", name], check=False, capture_output=True)


def runnable_by(account: pwd.struct_passwd, python: str) -> bool:
    probe = ["runuser", "-u", account.pw_name, "--", python, "-c", "pass"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def python_for(accounts: list[pwd.struct_passwd]) -> str:
    """A Python every account can run (the jobs use the standard library only)."""
    for python in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if all(runnable_by(a, python) for a in accounts):
            return python
    pytest.skip("no Python that the test accounts may run")


SRC = Path(__file__).resolve().parents[2] / "src"  # the CLI needs the standard library only


def require_railyard(site: Site) -> None:
    """Skip, saying what is in the way, unless both tenants can run this checkout's railyard
    from their own shells (``site.python`` with ``PYTHONPATH=SRC``): a clone in a 0700
    directory (a home, /root) keeps them out, and the test would fail on ``No module named
    railyard`` instead of testing anything. Asked once per site."""
    key = id(site.server)
    if key not in _UNREADABLE:
        _UNREADABLE[key] = _why_unreadable(site)
    why = _UNREADABLE[key]
    if why is not None:
        pytest.skip(why)


_UNREADABLE: dict[int, str | None] = {}


def _why_unreadable(site: Site) -> str | None:
    from railyard.control.usecases.pythonreach import blocking_path

    for tenant in (site.alice, site.bob):
        done = tenant.shell(f"PYTHONPATH={SRC} {site.python} -c 'import railyard'")
        if done.returncode != 0:
            blocker = blocking_path(tenant.account, [SRC / "railyard" / "__init__.py"])
            where = f": {blocker} is closed to them" if blocker is not None else ""
            return (f"job users cannot read this checkout ({SRC}){where} (hint: clone it where "
                    "other accounts can read it, e.g. under /opt or /srv)")  # fmt: skip
    return None


@contextmanager
def scratch_dir(prefix: str = "railyard-iso-") -> Iterator[Path]:
    """A directory job users can pass through (pytest's own tmp is root's, 0700)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def private_dir(parent: Path, account: pwd.struct_passwd) -> Path:
    path = parent / account.pw_name
    path.mkdir(mode=0o700, exist_ok=True)
    os.chown(path, account.pw_uid, account.pw_gid)
    return path


def user(server: ServerProcess, name: str, unix_user: str) -> str:
    """A railyard user mapped to ``unix_user``, member of the default queue; its token."""
    server.request("POST", "/v1/users", json={"name": name, "unix_user": unix_user})
    server.request("POST", "/v1/queues/default/members", json={"user": name})
    token: str = server.request("POST", "/v1/tokens", json={"user": name})["token"]
    return token


def submit(server: ServerProcess, token: str, **body: Any) -> str:
    body.setdefault("gpus", 1)
    body.setdefault("export", "ALL")
    body.setdefault("env", {"PATH": "/usr/local/bin:/usr/bin:/bin"})
    response = server.call("POST", "/v1/jobs", token=token, json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()[0]["id"]
    return job_id


def job(server: ServerProcess, job_id: str) -> dict[str, Any]:
    data: dict[str, Any] = server.request("GET", f"/v1/jobs/{job_id}")
    return data


def finished(server: ServerProcess, job_id: str, timeout_s: float = 90) -> dict[str, Any]:
    """The job's record once it has ended (completed, failed, cancelled, timeout)."""
    ended = ("completed", "failed", "cancelled", "timeout")
    wait(lambda: job(server, job_id)["state"] in ended, timeout_s)
    return job(server, job_id)


@dataclass
class Tenant:
    """A railyard user mapped to its own Unix account, with a private scratch directory."""

    name: str
    account: pwd.struct_passwd
    token: str
    home: Path  # a 0700 directory of the account's, inside the scratch area

    def shell(self, script: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        """``bash -c SCRIPT`` as this tenant's account, in its scratch directory."""
        return subprocess.run(
            ["runuser", "-u", self.account.pw_name, "--", "bash", "-c", script],
            cwd=self.home, capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip


@dataclass
class Site:
    """A root server (multi-user mode) with two tenants, alice and bob."""

    server: ServerProcess
    alice: Tenant
    bob: Tenant
    scratch: Path
    python: str

    @property
    def spool(self) -> Path:
        return self.server.spool_dir


@contextmanager
def shared_site(state_dir: Path, *, gpus: int = 4, extra: tuple[str, ...] = ()) -> Iterator[Site]:
    """Two accounts, a scratch area they can traverse, a root server with its spool there."""
    with unix_accounts(2) as accounts, scratch_dir("railyard-sec-") as scratch:
        python = python_for(accounts)
        server = ServerProcess(state_dir, gpus=gpus, spool_dir=scratch / "spool", extra=extra)
        server.start(timeout_s=90)  # a loaded machine (two test workers) starts it slowly
        try:
            tenants = [
                Tenant(
                    name,
                    account,
                    user(server, name, account.pw_name),
                    private_dir(scratch, account),
                )
                for name, account in zip(("alice", "bob"), accounts, strict=True)
            ]
            yield Site(server, tenants[0], tenants[1], scratch, python)
        finally:
            server.stop()
