"""``srun --container-image`` in a bare batch script (Pyxis's srun options): each step's tasks
run in the image through the batch step's root launcher (railyard.exec.task.stepd), as the job's
user, with srun's step variables, its output and its exit code; a bare step after still
works; a mount outside the queue's prefixes and a peer outside the job are refused; cancel
leaves no container. Real Podman, the image of tests/exec/container_image.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from exec_helpers import NODE, MakeExecutor, logs, spec, wait_for, wait_report
from tests.exec.container_image import OS_NAME, imported_image
from tests.integration.tenants import (
    NEEDS_ROOT,
    python_for,
    runnable_by,
    scratch_dir,
    unix_accounts,
)
from tests.parts import needs

from railyard.exec import LaunchSpec, LocalExecutor, Outcome
from railyard.exec.cgroups.proctrack import step_name
from railyard.exec.task import jobfiles
from railyard.exec.task.steps import socket_path

pytestmark = [needs("podman"), *NEEDS_ROOT]

TIMEOUT_S = 90.0
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(autouse=True)
def srun_for_users(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Where railyard's own Python lives in a directory job users cannot enter (root's
    pyenv here), the batch script's ``srun`` runs this checkout's module with the system's
    Python (srun needs the standard library only)."""
    with unix_accounts(1) as (probe,):
        if runnable_by(probe, sys.executable) or not os.access("/usr/bin/python3", os.X_OK):
            yield
            return
    shim = Path(tempfile.mkdtemp(prefix="railyard-py-")) / "python"
    run = (
        "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'srun'; "
        "runpy.run_module('railyard.exec.task.srun', run_name='__main__', alter_sys=True)"
    )
    shim.write_text(f'#!/bin/sh\nshift 3\nexec /usr/bin/python3 -I -c "{run}" {SRC} "$@"\n')
    shim.chmod(0o755)
    shim.parent.chmod(0o755)
    monkeypatch.setattr(jobfiles, "sys", SimpleNamespace(executable=str(shim)))
    yield
    shutil.rmtree(shim.parent, ignore_errors=True)


def batch(work: Path, body: str, user: str, **extra: object) -> LaunchSpec:
    """A batch job of ``user`` on 2 GPUs and 2 tasks of this node whose script is ``body``."""
    script_path = work / "job" / "script.sh"
    return spec(
        work,
        (str(script_path),),
        batch=True,
        script="#!/bin/bash\n" + body,
        script_path=script_path,
        steps_dir=work / "job" / "steps",
        job_env={"SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "demo"},
        user=user,
        workers=2,
        gpus_per_worker=1,
        gpus=(0, 1),
        container_allowed=("/usr",),
        **extra,
    )


def step_containers(step: str) -> list[str]:
    listed = subprocess.run(
        ["podman", "ps", "--all", "--filter", f"label=railyard.step={step}", "--format",
         "{{.Names}}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [n for n in listed.stdout.split() if n.startswith(f"railyard-{step}")]


def test_a_step_runs_in_the_image_as_the_user_and_a_bare_step_after_it(
    make_executor: MakeExecutor,
) -> None:
    image = imported_image()
    with unix_accounts(1) as (account,), scratch_dir() as work:
        os.chmod(work, 0o777)
        executor = make_executor(gpus=2)
        probe = (
            'grep NAME /etc/os-release; echo "task $SLURM_PROCID/$SLURM_NTASKS '
            "local $SLURM_LOCALID rank $RANK/$WORLD_SIZE step $SLURM_STEP_ID uid $(id -u) "
            'gpus $CUDA_VISIBLE_DEVICES job $SLURM_JOB_ID"; '
            "if [ $SLURM_PROCID = 1 ]; then sleep 1; exit 3; fi"  # the others end first
        )
        body = (
            f"srun --container-image={image} --container-mounts=/usr:/usr:ro "
            f"sh -c '{probe}'\n"
            'echo "first step exit $?"\n'
            "srun sh -c 'echo bare $SLURM_PROCID step $SLURM_STEP_ID on the host'\n"
        )
        executor.start(batch(work, body, account.pw_name))
        report = wait_report(executor, "job", TIMEOUT_S)
        text = logs(work, "job")
        assert report.outcome == Outcome.COMPLETED, text
        assert text.count(f'NAME="{OS_NAME}"') == 2, text  # the image's, in both tasks
        for rank in (0, 1):
            assert (
                f"task {rank}/2 local {rank} rank {rank}/2 step 0 uid {account.pw_uid} "
                "gpus 0,1 job 42"
            ) in text, text
        assert "srun: error: task 1: Exited with exit code 3" in text, text
        assert "first step exit 3" in text, text
        assert "bare 0 step 1 on the host" in text
        assert "bare 1 step 1 on the host" in text
        step = step_name("job", 0, work / "logs" / "job")
        assert step_containers(step) == []


def test_a_step_mount_outside_the_prefixes_and_root_options_are_refused(
    make_executor: MakeExecutor,
) -> None:
    image = imported_image()
    with unix_accounts(1) as (account,), scratch_dir() as work:
        os.chmod(work, 0o777)
        executor = make_executor(gpus=2)
        body = (
            f"srun --container-image={image} --container-mounts=/usr:/usr:ro,/etc:/host-etc "
            "cat /host-etc/shadow\n"
            'echo "mount exit $?"\n'
            f"srun --container-image={image} --container-remap-root id\n"
            'echo "remap exit $?"\n'
            f"srun --container-image={image} --container-name=keep id\n"
            'echo "name exit $?"\n'
        )
        executor.start(batch(work, body, account.pw_name))
        report = wait_report(executor, "job", TIMEOUT_S)
        text = logs(work, "job")
        assert report.outcome == Outcome.COMPLETED, text
        assert (
            "srun: error: --container-mounts: /etc is outside what this job's queue lets "
            "containers mount (/usr)"
        ) in text, text
        assert "mount exit 2" in text
        assert "remap exit 2" in text
        assert "name exit 2" in text
        assert "--container-remap-root is not supported" in text
        assert "root:" not in text


def test_only_the_jobs_own_processes_reach_the_launcher(make_executor: MakeExecutor) -> None:
    """Another user cannot connect; the job's user from outside the job is refused."""
    with unix_accounts(2) as (account, other), scratch_dir() as work:
        os.chmod(work, 0o777)
        executor = make_executor(gpus=2)
        handle = executor.start(batch(work, "echo up; sleep 600\n", account.pw_name))
        step = step_name("job", 0, handle.workers[0].exit_path.parent)
        path = socket_path(step)
        wait_for(lambda: path.exists() and "up" in logs(work, "job"), TIMEOUT_S)
        assert (path.stat().st_uid, path.stat().st_mode & 0o777) == (account.pw_uid, 0o600)
        ask = (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            "    s.connect(sys.argv[1])\n"
            "except OSError as e:\n"
            "    print('refused', e.strerror); raise SystemExit\n"
            "print(s.makefile().readline().strip())\n"  # the peer is checked first
        )
        python = python_for([account, other])
        answers = {}
        for who in (other, account):  # neither runs in the job's cgroup
            done = subprocess.run(
                ["runuser", "-u", who.pw_name, "--", python, "-c", ask, str(path)],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            answers[who.pw_name] = done.stdout.strip() + done.stderr.strip()
        assert answers[other.pw_name] == "refused Permission denied", answers
        assert answers[account.pw_name].startswith("error pid "), answers
        assert "is not a process of this job" in answers[account.pw_name]
        executor.cancel("job")
        wait_report(executor, "job", TIMEOUT_S)
        assert not path.exists()


def test_cancel_during_a_step_leaves_no_container(make_executor: MakeExecutor) -> None:
    image = imported_image()
    with unix_accounts(1) as (account,), scratch_dir() as work:
        os.chmod(work, 0o777)
        executor = make_executor(gpus=2, term_grace_s=1.0)
        body = (
            f"srun --container-image={image} --container-mounts=/usr:/usr:ro "
            "sh -c \"trap '' TERM; echo in''side; exec sleep 600\"\n"
        )
        handle = executor.start(batch(work, body, account.pw_name))
        step = step_name("job", 0, handle.workers[0].exit_path.parent)
        wait_for(lambda: logs(work, "job").count("inside") == 2, TIMEOUT_S)
        assert sorted(step_containers(step)) == [f"railyard-{step}-0-0", f"railyard-{step}-0-1"]
        began = time.monotonic()
        executor.cancel("job")
        report = wait_report(executor, "job", TIMEOUT_S)
        assert report.outcome == Outcome.KILLED
        assert time.monotonic() - began < 30
        # the report comes first; the executor's cleanup thread removes what the step left
        wait_for(lambda: step_containers(step) == [], TIMEOUT_S)
        wait_for(lambda: not list(Path("/sys/fs/cgroup").glob(f"*/railyard/{step}")), TIMEOUT_S)
        left = subprocess.run(["pgrep", "-u", account.pw_name], capture_output=True, text=True)
        assert left.stdout == ""
        assert not socket_path(step).exists()


def test_the_batch_script_still_reaches_only_its_gpus(make_executor: MakeExecutor) -> None:
    """The step's v1 devices group stays open for the runtime; the script's own group below
    it (`batch`) keeps the deny lines."""
    with unix_accounts(1) as (account,), scratch_dir() as work, scratch_dir() as dev:
        os.chmod(work, 0o777)
        for minor in range(4):
            os.mknod(dev / f"nvidia{minor}", 0o666 | 0o020000, os.makedev(195, minor))
            (dev / f"nvidia{minor}").chmod(0o666)
        executor = make_executor(gpus=4)
        body = f'for n in 0 1 2 3; do (exec 3<>"{dev}/nvidia$n") 2>&1 | sed "s|.*: |$n: |"; done\n'
        job = batch(work, body, account.pw_name)
        executor.start(replace(job, workers=1, gpus_per_worker=1, placement={NODE: (2,)}))
        report = wait_report(executor, "job", TIMEOUT_S)
        text = logs(work, "job")
        assert report.outcome == Outcome.COMPLETED, text
        if "cgroup v1 devices" not in text:
            pytest.skip("no cgroup v1 devices controller here")
        assert "2: No such device or address" in text, text  # its own: allowed (no driver)
        for other in (0, 1, 3):
            assert f"{other}: Operation not permitted" in text, text


def test_a_signal_to_srun_reaches_its_containers(make_executor: MakeExecutor) -> None:
    """`timeout` signals its own process group: srun's, not the containers' runtimes'."""
    image = imported_image()
    with unix_accounts(1) as (account,), scratch_dir() as work:
        os.chmod(work, 0o777)
        executor = make_executor(gpus=2)
        task = "trap 'echo got TERM; exit 143' TERM; echo started; sleep 600 & wait"
        body = (
            f"timeout 4 srun -n 1 --container-image={image} --container-mounts=/usr:/usr:ro "
            f'sh -c "{task}"\n'
            'echo "srun exit $?"\n'
        )
        began = time.monotonic()
        executor.start(batch(work, body, account.pw_name))
        report = wait_report(executor, "job", TIMEOUT_S)
        text = logs(work, "job")
        assert report.outcome == Outcome.COMPLETED, text
        assert "started" in text, text
        assert "got TERM" in text, text
        assert "srun exit 124" in text, text
        assert time.monotonic() - began < 30


def job_and_runtimes(work: Path) -> str:
    """The job's log and the runtime's processes, for a failure's message."""
    ps = ["ps", "-eo", "pid,pgid,stat,wchan:20,args", "--forest"]
    tree = subprocess.run(ps, capture_output=True, text=True).stdout.splitlines()
    runtime = [line for line in tree if any(w in line for w in ("podman", "conmon", "stepd"))]
    return logs(work, "job") + "\n".join(runtime)


def proxy_installed(executor: LocalExecutor, work: Path) -> None:
    """Podman before 4.4 installs its signal proxy only after the container has started
    (containers/podman#17489): a signal in between is caught and dropped. SIGWINCH, which
    nothing else in the job acts on, is sent until the task says one arrived."""
    deadline = time.monotonic() + TIMEOUT_S
    while "got WINCH" not in logs(work, "job"):
        assert time.monotonic() < deadline, job_and_runtimes(work)
        executor.signal("job", "SIGWINCH")
        time.sleep(0.5)


def test_the_preempt_signal_reaches_a_step_container_once(make_executor: MakeExecutor) -> None:
    image = imported_image()
    with unix_accounts(1) as (account,), scratch_dir() as work:
        os.chmod(work, 0o777)
        executor = make_executor(gpus=2, term_grace_s=1.0)
        task = "trap 'echo got USR1' USR1; trap 'echo got WINCH' WINCH; while :; do sleep 0.1; done"
        body = (
            f'srun -n 1 --container-image={image} --container-mounts=/usr:/usr:ro sh -c "{task}"\n'
        )
        executor.start(batch(work, body, account.pw_name))
        proxy_installed(executor, work)
        executor.signal("job", "SIGUSR1")
        wait_for(lambda: "got USR1" in logs(work, "job"), 30, lambda: job_and_runtimes(work))
        time.sleep(1.0)  # a second delivery (srun passing it on too) would show by now
        executor.cancel("job")
        wait_report(executor, "job", TIMEOUT_S)
        assert logs(work, "job").count("got USR1") == 1, logs(work, "job")
