"""Jobs in containers under the local executor, with Debian's Podman and an image imported in
the test (tests/exec/container_image.py): who the task is, what it may mount, which GPUs it
sees, and that cancel leaves neither a process nor a container behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from exec_helpers import MakeExecutor, logs, spec, wait_for, wait_report
from tests.exec.container_image import OS_NAME, SUID_ID, imported_image
from tests.integration.tenants import NEEDS_ROOT, scratch_dir, unix_accounts
from tests.parts import needs

from railyard.exec import ExitReport, LocalExecutor, Outcome
from railyard.exec.cgroups.proctrack import step_name
from railyard.exec.containers.container import ContainerSpec, Mount, container_name

pytestmark = [needs("podman"), *NEEDS_ROOT]

USR = Mount("/usr", "/usr", readonly=True)  # the image links /bin and /lib into /usr
TIMEOUT_S = 120.0


def in_image(*mounts: Mount) -> ContainerSpec:
    return ContainerSpec(image=imported_image(), mounts=(USR, *mounts))


def wait_all(executor: LocalExecutor, job_ids: set[str]) -> dict[str, ExitReport]:
    reports: dict[str, ExitReport] = {}
    deadline = time.monotonic() + TIMEOUT_S
    while set(reports) != job_ids and time.monotonic() < deadline:
        reports |= {r.job_id: r for r in executor.poll()}
        time.sleep(0.05)
    assert set(reports) == job_ids, reports
    return reports


def containers_of(step: str) -> list[str]:
    listed = subprocess.run(
        ["podman", "ps", "--all", "--filter", f"label=railyard.step={step}", "--format",
         "{{.Names}}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return listed.stdout.split()


def test_the_task_is_the_user_in_the_image_and_setuid_gains_nothing(
    make_executor: MakeExecutor,
) -> None:
    with unix_accounts(1) as (account,), scratch_dir() as work:
        os.chmod(work, 0o777)
        executor = make_executor()
        probe = (
            "cat /etc/os-release; echo uid=$(id -u) gid=$(id -g) name=$(id -un); "
            f"echo suid=$({SUID_ID} -u); grep NoNewPrivs /proc/self/status; "
            'echo home=$HOME pwd=$(pwd) job=$SLURM_JOB_ID; touch "$HOME/made-inside"'
        )
        executor.start(
            spec(
                work,
                ("sh", "-c", probe),
                user=account.pw_name,
                container=in_image(),
                container_allowed=("/usr",),
                job_env={"SLURM_JOB_ID": "7"},
            )
        )
        report = wait_report(executor, "job", TIMEOUT_S)
        text = logs(work, "job")
        assert (report.outcome, report.exit_code) == (Outcome.COMPLETED, 0), text
        assert f'NAME="{OS_NAME}"' in text  # the image's, not the host's
        uid, gid = account.pw_uid, account.pw_gid
        assert f"uid={uid} gid={gid} name={account.pw_name}" in text, text
        assert f"suid={uid}" in text, text  # a setuid-root binary stays the user
        assert re.search(r"NoNewPrivs:\s+1", text), text
        assert f"home={account.pw_dir} pwd={work} job=7" in text, text
        made = Path(account.pw_dir, "made-inside")  # home is the user's own, mounted
        assert made.stat().st_uid == uid
        # it ended before anyone asked: the executor still says, once, when its image was there
        assert set(executor.ready()) == {"job"}
        assert executor.ready() == {}


def test_cancel_leaves_no_process_no_container_no_cgroup(make_executor: MakeExecutor) -> None:
    with unix_accounts(1) as (account,), scratch_dir() as work:
        os.chmod(work, 0o777)
        executor = make_executor(term_grace_s=1.0)
        # It ignores SIGTERM: only the kill after the grace ends it, with its runtime.
        command = ("sh", "-c", "trap '' TERM; echo read''y; exec sleep 600")
        began_t_s = time.time()
        handle = executor.start(
            spec(
                work,
                command,
                job_id="c",
                user=account.pw_name,
                container=in_image(),
                container_allowed=("/usr",),
            )
        )
        step = step_name("c", 0, handle.workers[0].exit_path.parent)
        wait_for(lambda: "\nready" in logs(work, "c"), TIMEOUT_S)
        assert containers_of(step) == [container_name(step, 0)]
        # its image was ready before its command ran, and the executor says when
        attempt, ready_t_s = executor.ready()["c"]
        assert attempt == 0
        assert began_t_s <= ready_t_s <= time.time()
        executor.cancel("c")
        report = wait_report(executor, "c", TIMEOUT_S)
        assert report.outcome == Outcome.KILLED
        # the report comes first; the executor's cleanup thread removes what the step left
        wait_for(lambda: containers_of(step) == [], TIMEOUT_S)
        wait_for(lambda: not list(Path("/sys/fs/cgroup").glob(f"*/railyard/{step}")), TIMEOUT_S)
        left = subprocess.run(["pgrep", "-u", account.pw_name], capture_output=True, text=True)
        assert left.stdout == ""


def test_a_mount_is_opened_as_the_user_and_kept_to_its_prefixes(
    make_executor: MakeExecutor,
) -> None:
    with unix_accounts(1) as (account,), scratch_dir() as work, scratch_dir() as data:
        os.chmod(work, 0o777)
        (data / "shared").mkdir()
        (data / "shared" / "f").write_text("data for all\n")
        os.chmod(data / "shared", 0o755)
        os.chmod(data / "shared" / "f", 0o644)
        secret = data / "root-only"
        secret.mkdir(mode=0o700)
        (secret / "inner").mkdir(mode=0o755)
        (secret / "inner" / "f").write_text("root's\n")
        os.chmod(secret / "inner" / "f", 0o644)
        (data / "shared" / "out").symlink_to("/etc")  # leads out of the allowed prefix
        executor = make_executor()
        cases = {
            "ok": (Mount(str(data / "shared"), "/data", readonly=True), "cat /data/f"),
            "link": (Mount(str(data / "shared" / "out"), "/etc2"), "true"),
            # The user cannot pass through the 0700 directory, so neither can their mount.
            "hidden": (Mount(str(secret / "inner"), "/x"), "cat /x/f"),
        }
        for job_id, (mount, command) in cases.items():
            executor.start(
                spec(
                    work,
                    ("sh", "-c", command),
                    job_id=job_id,
                    user=account.pw_name,
                    container=in_image(mount),
                    container_allowed=("/usr", str(data)),
                )
            )
        reports = wait_all(executor, set(cases))
        assert reports["ok"].exit_code == 0, logs(work, "ok")
        assert "data for all" in logs(work, "ok")
        assert reports["link"].exit_code == 127
        assert "is /etc, outside what this job may mount" in logs(work, "link")
        assert reports["hidden"].exit_code == 127
        assert "Permission denied" in logs(work, "hidden"), logs(work, "hidden")
        assert "root's" not in logs(work, "hidden")


def test_only_the_jobs_gpus_are_devices_inside(make_executor: MakeExecutor) -> None:
    with scratch_dir() as work, scratch_dir() as dev:
        for minor in range(4):
            os.mknod(dev / f"nvidia{minor}", 0o666 | 0o020000, os.makedev(195, minor))
        os.mknod(dev / "nvidiactl", 0o666 | 0o020000, os.makedev(195, 255))
        executor = make_executor(gpus=4)
        executor.dev_dir = dev
        command = ("sh", "-c", "ls /dev | grep nvidia | tr '\\n' ' '; echo; ls /proc/self/fd")
        executor.start(
            spec(
                work,
                command,
                gpus_per_worker=2,
                gpus=(1, 3),
                container=in_image(),
                container_allowed=("/usr",),
            )
        )
        report = wait_report(executor, "job", TIMEOUT_S)
        text = logs(work, "job")
        assert report.exit_code == 0, text
        assert "nvidia1 nvidia3 nvidiactl \n" in text, text


def test_an_archive_cannot_take_an_image_name_on_the_node(make_executor: MakeExecutor) -> None:
    """A user's docker-archive tagged with a name another job asks for (here one the node has)
    runs for its user, by id; the name keeps meaning the node's image, so a later job by that
    name runs it (issue 52 item 6: the load used to move the name, then untag it)."""
    victim = imported_image("localhost/railyard-victim:1", "the victim's image")
    with scratch_dir() as work, scratch_dir() as files:
        evil = imported_image("localhost/railyard-evil:1", "EVIL")
        archive = files / "evil.tar"
        subprocess.run(["podman", "tag", evil, victim], check=True)  # the archive's RepoTag
        subprocess.run(["podman", "save", "--quiet", "-o", str(archive), victim], check=True)
        subprocess.run(["podman", "rmi", "--force", evil, victim], capture_output=True)
        imported_image(victim, "the victim's image")  # the node's own, under that name
        os.chmod(archive, 0o644)
        executor = make_executor()
        probe = ("sh", "-c", "grep NAME /etc/os-release")
        usr = (USR,)
        executor.start(
            spec(
                work,
                probe,
                job_id="a",
                container=ContainerSpec(image=f"docker-archive:{archive}", mounts=usr),
                container_allowed=("/usr",),
            )
        )
        assert wait_report(executor, "a", TIMEOUT_S).exit_code == 0, logs(work, "a")
        assert 'NAME="EVIL"' in logs(work, "a")
        executor.start(
            spec(
                work,
                probe,
                job_id="b",
                container=ContainerSpec(image=victim, mounts=usr),
                container_allowed=("/usr",),
            )
        )
        report = wait_report(executor, "b", TIMEOUT_S)
        assert report.exit_code == 0, logs(work, "b")
        assert "EVIL" not in logs(work, "b").split("\n", 1)[1], logs(work, "b")
        assert "the victim's image" in logs(work, "b")
    subprocess.run(["podman", "rmi", "--force", victim], capture_output=True)


def test_a_workdir_the_runtime_would_make_on_the_host_is_refused(
    make_executor: MakeExecutor,
) -> None:
    """A container workdir missing inside a mounted host directory (the job's cwd) would be
    made there by the root runtime; the wrapper refuses it, whatever the API let through
    (issue 53 item 1)."""
    with scratch_dir() as work:
        executor = make_executor()
        workdir = work / "made-by-root" / "sub"
        container = ContainerSpec(image=imported_image(), mounts=(USR,), workdir=str(workdir))
        executor.start(spec(work, ("true",), container=container, container_allowed=("/usr",)))
        report = wait_report(executor, "job", TIMEOUT_S)
        assert report.exit_code != 0, logs(work, "job")
        assert not (work / "made-by-root").exists()
        assert f"container workdir {workdir}: No such file or directory" in logs(work, "job")


@needs("torch")
@pytest.mark.slow  # two torch imports per attempt, two attempts: the extended tier
def test_ddp_in_containers_preempted_and_resumed(make_executor: MakeExecutor) -> None:
    """examples/ddp_train.py, two ranks (gloo) each in its own container: preempted through
    the runtime's signal proxy, it checkpoints into the mounted checkpoint directory, and the
    next attempt resumes from it."""
    repo = Path(__file__).resolve().parents[2]
    python_dirs = dict.fromkeys([sys.base_prefix, sys.prefix, str(repo)])
    mounts = [Mount(d, d, readonly=True) for d in python_dirs]
    script = repo / "examples" / "ddp_train.py"
    with scratch_dir() as work:

        def train(restart: int, *args: str) -> None:
            executor = make_executor(term_grace_s=30)
            executor.start(
                spec(
                    work,
                    (sys.executable, str(script), *args),
                    job_id="ddp",
                    workers=2,
                    restart_count=restart,
                    container=in_image(*mounts),
                    container_allowed=("/usr", *python_dirs),
                )
            )
            trains.append(executor)

        trains: list = []
        train(0, "--steps", "400", "--ckpt-every", "5", "--sleep-per-step", "0.05")
        wait_for((work / "ckpt" / "ddp" / "ckpt.pt").exists, 240)
        trains[0].request_checkpoint_stop("ddp", grace_s=120)
        report = wait_report(trains[0], "ddp", 240)
        text = logs(work, "ddp")
        assert report.outcome == Outcome.PREEMPTED, text
        stopped = re.search(r"preempted at step (\d+)", text)
        assert stopped is not None, text
        train(1, "--steps", str(int(stopped.group(1)) + 10), "--ckpt-every", "5")
        report = wait_report(trains[1], "ddp", 240)
        text = logs(work, "ddp")
        assert (report.outcome, report.exit_code) == (Outcome.COMPLETED, 0), text
        assert f"resumed from step {stopped.group(1)}" in text
