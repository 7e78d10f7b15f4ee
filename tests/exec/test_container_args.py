"""The container's command line and what goes in it, without a runtime: the privileges a task
gives up, the environment it keeps, the mounts and images it may name."""

from __future__ import annotations

from pathlib import Path

import pytest
from exec_helpers import spec

from railyard.exec.containers.container import (
    ContainerSpec,
    ContainerTask,
    Mount,
    container_env,
    gpu_devices,
    image_problem,
    parse_mounts,
    run_args,
    under,
)
from railyard.exec.containers.containerlaunch import container_task
from railyard.exec.task.identity import Account


def test_the_command_line_drops_every_privilege_and_shares_the_hosts_namespaces() -> None:
    task = ContainerTask(image="img", name="railyard-s-0", step="s", workdir="/w",
                         cgroup_parent="/railyard/s", devices=("/dev/x:/dev/nvidia0",))  # fmt: skip
    passwd = "alice:*:1001:1001:alice:/home/alice:/bin/sh"
    args = run_args(task, uid=1001, gid=1001, groups=[1001, 27, 100], env_file="/proc/self/fd/9",
                    volumes=[("/run/stage/m0", Mount("/data", "/d", True))], command=["python"],
                    image="sha256:abc", passwd=passwd)  # fmt: skip
    joined = " ".join(args)
    for part in ("--user 1001:1001", "--cap-drop all", "--security-opt no-new-privileges",
                 "--network host", "--ipc host", "--pid host", "--group-add 27",
                 "--group-add 100", "--cgroup-parent /railyard/s", "--pull never",
                 "--device /dev/x:/dev/nvidia0", "--volume /run/stage/m0:/d:ro",
                 "--env-file /proc/self/fd/9", "--ulimit nofile="):  # fmt: skip
        assert part in joined, part
    assert "--group-add 1001" not in joined  # the primary group is --user's
    assert args[args.index("--entrypoint") + 1] == ""  # Pyxis's default: no entrypoint
    assert args[-2:] == ["sha256:abc", "python"]


def test_the_image_keeps_its_own_variables_unless_named() -> None:
    job = {"PATH": "/job/bin", "HOME": "/home/a", "CUDA_HOME": "/job/cuda", "RANK": "1"}
    kept = container_env(job, image_env_names=["CUDA_HOME", "LANG"], keep=[])
    assert kept == {"HOME": "/home/a", "RANK": "1"}  # PATH and CUDA_HOME stay the image's
    named = container_env(job, image_env_names=["CUDA_HOME"], keep=["PATH", "CUDA_HOME"])
    assert named == job


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/data", [Mount("/data", "/data")]),
        ("/data:/d:ro,/s//x/:/y", [Mount("/data", "/d", True), Mount("/s/x", "/y")]),
    ],
)
def test_mounts_parse(text: str, expected: list[Mount]) -> None:
    assert parse_mounts(text) == expected


@pytest.mark.parametrize("text", ["data:/d", "/a:b", "/a/../etc:/x", "/a:/b:rx", "/a:/b:ro:x"])
def test_bad_mounts_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"'"):
        parse_mounts(text)


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        ("nvcr.io/nvidia/pytorch:24.05-py3", True),
        ("docker://ubuntu:24.04", True),
        ("localhost:5000/team/img@sha256:" + "a" * 64, True),
        ("docker-archive:/scratch/img.tar", True),
        ("docker-archive:img.tar", False),
        ("dir:/root/secret", False),
        ("oci:/var/lib/x", False),
        ("containers-storage:other", False),
        ("-v", False),
        ("a b", False),
    ],
)
def test_images_that_would_make_root_read_a_path_are_refused(image: str, ok: bool) -> None:
    assert (image_problem(image) is None) == ok


def test_the_root_directory_is_never_mounted_over_the_image(tmp_path: Path) -> None:
    account = Account("alice", 1001, 1001, "/", "/bin/sh")  # a home of "/" (some system users)
    launch = spec(tmp_path, ("true",), workdir=Path("/"), container=ContainerSpec(image="img"))
    task = container_task(launch, step="s", rank=0, gpu_minors=[], account=account, cwd="/",
                          cgroup_parent="/railyard/s")  # fmt: skip
    assert "/" not in [m.src for m in task.mounts]
    assert [m.src for m in task.mounts] == [str(tmp_path / "ckpt" / "job")]


def test_gpus_are_the_jobs_device_files_at_their_usual_names(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl"):
        (tmp_path / name).touch()
    devices, line = gpu_devices([2, 0], tmp_path)
    assert devices == [f"{tmp_path}/nvidia2:/dev/nvidia2", f"{tmp_path}/nvidia0:/dev/nvidia0",
                       f"{tmp_path}/nvidiactl:/dev/nvidiactl"]  # fmt: skip
    assert "no NVIDIA CDI spec" in line
    assert gpu_devices([], tmp_path) == ([], "GPUs: none")


@pytest.mark.parametrize(
    ("path", "prefix", "inside"),
    [("/data", "/data", True), ("/data/x", "/data/", True), ("/data2", "/data", False),
     ("/etc", "/", True), ("/datax/y", "/data", False)],
)  # fmt: skip
def test_a_prefix_holds_only_the_paths_below_it(path: str, prefix: str, inside: bool) -> None:
    assert under(path, prefix) is inside


def test_the_wrappers_pull_timeout_is_the_schedulers_pull_limit() -> None:
    """A pull longer than the scheduler lets a time limit wait must fail first, so no job runs
    uncounted; the wrapper keeps its own copy (it does not import the scheduler)."""
    from railyard.exec.containers.containerrun import PULL_TIMEOUT_S
    from railyard.sched.model import PULL_LIMIT_S

    assert PULL_TIMEOUT_S == PULL_LIMIT_S
