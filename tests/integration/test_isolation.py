"""Users' jobs run as their own Unix accounts and cannot reach each other, the store or a token.

For real: two Unix accounts are created (useradd), a real ``railyard up`` runs as root
(multi-user mode), user A's job writes secrets into its checkpoint directory, its log, its
working directory and its environment, and user B's job tries to read all of them, the store,
``client.json`` and A's process environment. Then a server started as A (single-user mode)
runs A's jobs and refuses B's at submit. Skips, saying why, where it cannot run as root.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.server_proc import ServerProcess
from tests.integration.tenants import (
    NEEDS_ROOT,
    job,
    private_dir,
    python_for,
    runnable_by,
    scratch_dir,
    submit,
    unix_accounts,
    user,
    wait,
)

pytestmark = NEEDS_ROOT

IDENTITY = """
import json, os, sys
mask = os.umask(0); os.umask(mask)
facts = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
         "groups": sorted(os.getgroups()), "umask": mask, "cwd": os.getcwd(),
         "env": dict(os.environ)}
open(sys.argv[1], "w").write(json.dumps(facts))
"""
ALICE = (
    IDENTITY
    + """
import time
ckpt = os.environ["RAILYARD_CHECKPOINT_DIR"]
open(os.path.join(ckpt, "secret.txt"), "w").write("alice checkpoint secret")
open(os.path.join(os.path.dirname(sys.argv[1]), "private.txt"), "w").write("alice private")
print("alice log secret", flush=True)
open(sys.argv[2], "w").write(str(os.getpid()))
time.sleep(300)
"""
)
BOB = (
    IDENTITY
    + """
targets = json.loads(sys.argv[2])
result = {}
for name, path in targets.items():
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            result[name] = "listed: " + ",".join(sorted(os.listdir(path)))
        else:
            with open(path, "rb") as f:
                result[name] = "read: " + f.read(60).decode("utf-8", "replace")
    except OSError as exc:
        result[name] = "denied: " + type(exc).__name__
open(sys.argv[3], "w").write(json.dumps(result))
"""
)


@pytest.fixture(scope="module")
def accounts() -> Iterator[list[pwd.struct_passwd]]:
    """Two fresh Unix accounts, removed afterwards."""
    with unix_accounts(2) as made:
        yield made


@pytest.fixture(scope="module")
def job_python(accounts: list[pwd.struct_passwd]) -> str:
    """A Python both accounts can run (the jobs use the standard library only)."""
    return python_for(accounts)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory job users can pass through (pytest's own tmp is root's, 0700)."""
    with scratch_dir() as path:
        yield path


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def check_identity(facts: dict[str, Any], account: pwd.struct_passwd) -> None:
    """What slurmstepd gives a task: the account's uid, gid, groups, names, home; umask 022."""
    assert (facts["uid"], facts["euid"], facts["gid"]) == (account.pw_uid,) * 2 + (account.pw_gid,)
    assert facts["groups"] == sorted(os.getgrouplist(account.pw_name, account.pw_gid))
    assert facts["umask"] == 0o022
    env = facts["env"]
    assert (env["USER"], env["LOGNAME"], env["HOME"]) == (
        account.pw_name,
        account.pw_name,
        account.pw_dir,
    )
    assert env["SHELL"] == account.pw_shell
    assert env["SLURM_JOB_UID"] == str(account.pw_uid)


def test_jobs_run_as_their_users_and_cannot_read_each_other(
    accounts: list[pwd.struct_passwd], job_python: str, scratch: Path, tmp_path: Path
) -> None:
    alice_unix, bob_unix = accounts
    py = job_python
    spool = scratch / "spool"
    state = tmp_path / "state"
    state.mkdir()
    server = ServerProcess(state, gpus=4, spool_dir=spool)
    server.start()
    try:
        alice = user(server, "alice", alice_unix.pw_name)
        bob = user(server, "bob", bob_unix.pw_name)
        alice_dir, bob_dir = private_dir(scratch, alice_unix), private_dir(scratch, bob_unix)
        env = {"PATH": "/usr/bin:/bin", "ALICE_SECRET_ENV": "alice env secret"}
        a = submit(
            server,
            alice,
            command=[py, "-c", ALICE, str(alice_dir / "ident.json"), str(alice_dir / "pid")],
            workdir=str(alice_dir),
            env=env,
        )
        wait(lambda: (alice_dir / "pid").exists())
        alice_pid = (alice_dir / "pid").read_text()
        a_dir = spool / a
        targets = {
            "checkpoint": str(a_dir / "checkpoints" / "secret.txt"),
            "checkpoints listing": str(a_dir / "checkpoints"),
            "spool log": str(a_dir / "logs" / "rank-0.log"),
            "task file": str(a_dir / "logs" / "rank-0.restart-0.task.json"),
            "job dir listing": str(a_dir),
            "spool listing": str(spool),
            "working dir": str(alice_dir / "private.txt"),
            "process environment": f"/proc/{alice_pid}/environ",
            "store": str(state / "railyard.db"),
            "client.json": str(state / "client.json"),
        }
        b = submit(
            server,
            bob,
            command=[
                py,
                "-c",
                BOB,
                str(bob_dir / "ident.json"),
                json.dumps(targets),
                str(bob_dir / "result.json"),
            ],
            workdir=str(bob_dir),
        )
        wait(lambda: job(server, b)["state"] == "completed")
        result = json.loads((bob_dir / "result.json").read_text())
        assert result == {name: result[name] for name in targets}
        leaked = {k: v for k, v in result.items() if not v.startswith("denied")}
        assert leaked == {}, leaked

        check_identity(json.loads((alice_dir / "ident.json").read_text()), alice_unix)
        bob_facts = json.loads((bob_dir / "ident.json").read_text())
        check_identity(bob_facts, bob_unix)
        assert bob_facts["cwd"] == str(bob_dir)
        assert not any(v.startswith("ry_") or "ry_" in v for v in bob_facts["env"].values())
        assert "ALICE_SECRET_ENV" not in bob_facts["env"]
        assert "RAILYARD_TOKEN" not in bob_facts["env"]

        # Ownership and modes: the user's files are the user's; the server's are its own.
        assert (os.stat(a_dir / "checkpoints").st_uid, mode(a_dir / "checkpoints")) == (
            alice_unix.pw_uid,
            0o700,
        )
        assert os.stat(a_dir / "logs" / "rank-0.log").st_uid == alice_unix.pw_uid
        assert mode(a_dir / "logs" / "rank-0.log") == 0o600
        assert (mode(spool), mode(a_dir), mode(a_dir / "logs")) == (0o711, 0o711, 0o711)
        assert mode(a_dir / "logs" / "rank-0.restart-0.task.json") == 0o600
        assert (mode(state), mode(state / "client.json"), mode(state / "railyard.db")) == (
            0o700,
            0o600,
            0o600,
        )

        # The API keeps refusing cross-user reads; the owner reads her log.
        assert server.call("GET", f"/v1/jobs/{a}/logs", token=bob).status_code == 404
        text = server.call("GET", f"/v1/jobs/{a}/logs", token=alice).json()["text"]
        assert "alice log secret" in text
        assert job(server, a)["unix_user"] == alice_unix.pw_name
    finally:
        for job_id in ("1", "2"):
            server.call("DELETE", f"/v1/jobs/{job_id}")
        server.stop()


def test_single_user_mode_runs_only_its_own_users_jobs(
    accounts: list[pwd.struct_passwd], scratch: Path
) -> None:
    """Started as an ordinary account, the server runs the jobs of users mapped to it, as
    itself, and refuses the others at submit with one line."""
    alice_unix, bob_unix = accounts
    if not runnable_by(alice_unix, sys.executable):
        pytest.skip(
            f"railyard's Python {sys.executable} cannot be run by other accounts here "
            "(it lives in a private directory); install railyard where they can run it"
        )
    state = private_dir(scratch, alice_unix) / "state"
    state.mkdir()
    os.chown(state, alice_unix.pw_uid, alice_unix.pw_gid)
    server = ServerProcess(state, gpus=2, unix_user=alice_unix.pw_name)
    server.start()
    try:
        log = (state / "server.log").read_text()
        assert "single-user mode: runs only jobs of users mapped to Unix account " in log
        assert f"{alice_unix.pw_name!r}" in log
        me = [sys.executable, "-c", IDENTITY, str(state / "me.json")]
        own = submit(server, server.token, command=me)
        wait(lambda: job(server, own)["state"] == "completed")
        check_identity(json.loads((state / "me.json").read_text()), alice_unix)
        assert (state / "jobs").is_dir()  # the spool defaults into the state directory

        bob = user(server, "bob", bob_unix.pw_name)
        refused = server.call("POST", "/v1/jobs", token=bob, json={"command": ["true"]})
        assert refused.status_code == 403
        assert refused.json()["detail"] == (
            f"single-user mode: this server runs as {alice_unix.pw_name!r} and runs only jobs "
            f"of users mapped to that account; user 'bob' maps to {bob_unix.pw_name!r} "
            "(hint: start `railyard up` as root to run jobs as their users' accounts)"
        )
    finally:
        server.stop()


def test_batch_script_and_its_srun_tasks_run_as_the_user(
    accounts: list[pwd.struct_passwd], job_python: str, scratch: Path, tmp_path: Path
) -> None:
    """The batch step and the tasks its srun starts are the user's processes, in the user's
    output file (slurm-%j.out in the working directory, created by the user)."""
    bob_unix = accounts[1]
    if not runnable_by(bob_unix, sys.executable):
        pytest.skip(f"srun runs railyard's Python {sys.executable}, which other accounts cannot")
    state = tmp_path / "state"
    state.mkdir()
    server = ServerProcess(state, gpus=2, spool_dir=scratch / "spool")
    server.start()
    try:
        bob = user(server, "bob", bob_unix.pw_name)
        work = private_dir(scratch, bob_unix)
        script = (
            "#!/bin/bash\n#SBATCH --gres=gpu:2 --ntasks-per-node=2\n"
            f"{job_python} -c '{IDENTITY}' {work}/batch.json\n"
            f"srun bash -c '{job_python} -c \"$0\" {work}/task-$SLURM_PROCID.json' '{IDENTITY}'\n"
        )
        job_id = submit(
            server, bob, script=script, gpus=None, gpus_per_node=2, ntasks_per_node=2,
            workdir=str(work),
        )  # fmt: skip
        wait(lambda: job(server, job_id)["state"] in ("completed", "failed"))
        output = work / f"slurm-{job_id}.out"
        assert job(server, job_id)["state"] == "completed", output.read_text()
        for name in ("batch", "task-0", "task-1"):
            check_identity(json.loads((work / f"{name}.json").read_text()), bob_unix)
        assert (os.stat(output).st_uid, mode(output)) == (bob_unix.pw_uid, 0o644)  # umask 022
    finally:
        server.stop()
