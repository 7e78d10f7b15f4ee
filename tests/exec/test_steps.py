"""The request of an ``srun --container-image`` step and the rules its launcher applies
(railyard.exec.task.steps), without Podman: what srun reads, what is refused, what a task gets."""

from __future__ import annotations

import os
import socket

import pytest

from railyard.exec.containers.container import ContainerTask, Mount
from railyard.exec.task.srun import SrunError, parse
from railyard.exec.task.steps import (
    StepLauncher,
    StepRequest,
    read_request,
    request_problem,
    send_request,
    step_task,
)

OWN = (Mount("/work/job", "/work/job"), Mount("/spool/ckpt", "/spool/ckpt"))
TEMPLATE = ContainerTask(
    image="", name="railyard-s-0", step="s", workdir="/work/job", mounts=OWN, own_mounts=2,
    allowed=("/datasets",), devices=("/dev/nvidia1:/dev/nvidia1",), cgroup_parent="/railyard/s",
)  # fmt: skip
LAUNCHER = StepLauncher(socket="/run/x.sock", template=TEMPLATE, home="/home/alice",
                        track_group="/sys/fs/cgroup/railyard/s", max_tasks=2,
                        names_file="/records/names")  # fmt: skip


def request(**changes: object) -> StepRequest:
    fields: dict[str, object] = {"image": "localhost/img:1", "command": ("python", "train.py"),
                                 "tasks": ((0, {"A": "1"}), (1, {"A": "2"}))}  # fmt: skip
    fields.update(changes)
    return StepRequest(**fields)  # type: ignore[arg-type]


def test_the_request_round_trips_with_srun_s_descriptors() -> None:
    sent = request(mounts="/datasets/a:/data:ro", env_names=("PATH",), mount_home=False,
                   cwd="/work/job", step_id=3)  # fmt: skip
    left, right = socket.socketpair()
    with left, right:
        send_request(left, sent, (1, 2))
        got, fds = read_request(right)
        for fd in fds:
            os.close(fd)
    assert got == sent
    assert len(fds) == 2


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({"mounts": "/etc:/host-etc"}, "/etc is outside what this job's queue lets containers"),
        ({"mounts": "/datasets/../etc"}, "without '..'"),
        ({"image": "dir:/root/image"}, "give an image name"),
        ({"image": "--privileged"}, "no leading '-'"),
        ({"tasks": tuple((r, {}) for r in range(3))}, "3 tasks, but the job has 2"),
        ({"env_names": ("A=B",)}, "variable names"),
        ({"workdir": "relative"}, "not an absolute path"),
    ],
)
def test_a_step_may_not_ask_for_more_than_its_job(changes: dict[str, object], refusal: str) -> None:
    problem = request_problem(request(**changes), LAUNCHER)
    assert problem is not None
    assert refusal in problem


def test_a_task_gets_the_job_s_paths_home_and_its_own_mounts_not_its_directory() -> None:
    ok = request(mounts="/datasets/a:/data:ro,/datasets/b:/work/job", cwd="/etc", step_id=2)
    assert request_problem(ok, LAUNCHER) is None
    task = step_task(LAUNCHER, ok, 1)
    assert task.name == "railyard-s-2-1"
    assert task.image == "localhost/img:1"
    assert [m.dst for m in task.mounts] == ["/work/job", "/home/alice", "/spool/ckpt", "/data"]
    assert task.own_mounts == 3  # the job's, and home: the step's own come after, checked
    assert task.workdir == "/work/job"  # /etc, srun's directory, is not mounted: not mounted
    assert task.devices == TEMPLATE.devices
    assert task.cgroup_parent == "/railyard/s"
    declined = step_task(
        LAUNCHER, request(mount_home=False, cwd="/data/x", mounts="/datasets:/data"), 0
    )
    assert "/home/alice" not in [m.dst for m in declined.mounts]
    assert declined.workdir == "/data/x"


def test_srun_reads_pyxis_s_options_and_refuses_the_rooted_ones() -> None:
    argv = ["--container-image=img", "--container-mounts", "/a:/b", "-n", "2",
            "--container-mounts=/c", "--no-container-mount-home", "python", "-c", "x"]  # fmt: skip
    args, _ = parse(argv)
    assert args.container == {"image": "img", "mounts": "/a:/b,/c", "mount_home": ""}
    assert args.ntasks == 2
    assert args.command == ["python", "-c", "x"]
    for option in ("--container-remap-root", "--container-name=keep", "--container-save=/x"):
        with pytest.raises(SrunError, match="is not supported"):
            parse(["--container-image=img", option, "id"])
    with pytest.raises(SrunError, match="go with --container-image"):
        parse(["--container-mounts=/a", "id"])
    with pytest.raises(SrunError, match="unknown option --container-bogus"):
        parse(["--container-bogus=1", "id"])
