"""The executor's half of a containerised launch: what one rank's container gets
(:class:`~railyard.exec.containers.container.ContainerTask`), decided from the job and the node.

The container sees the paths a bare job would use at the same places: the user's home
(unless declined), the working directory, the job's checkpoint directory, its batch script
and the directory of its web app, so that ``$HOME``, ``$SLURM_SUBMIT_DIR``,
``$RAILYARD_CHECKPOINT_DIR`` and the script path mean the same inside.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from railyard.exec.cgroups.containment import Containment
from railyard.exec.containers.container import (
    ContainerSpec,
    ContainerTask,
    Mount,
    available,
    container_name,
    gpu_devices,
    rdma_devices,
    ulimit_args,
)
from railyard.exec.protocol import ExecutorError, LaunchSpec
from railyard.exec.task.identity import Account
from railyard.exec.task.steps import StepLauncher, names_path, socket_path


def container_task(
    spec: LaunchSpec,
    *,
    step: str,
    rank: int,
    gpu_minors: Sequence[int],
    account: Account,
    cwd: str,
    cgroup_parent: str | None,
    dev: Path = Path("/dev"),
    ready_file: str = "",
) -> ContainerTask:
    """Rank ``rank``'s container on this node (``dev``: where the GPUs' device files are)."""
    assert spec.container is not None
    if cgroup_parent is None:
        raise ExecutorError(
            f"job {spec.job_id}: containers need a tracking cgroup on this node (no cgroup v2 "
            "with cgroup.kill and no v1 freezer): a killed runtime would leave its container"
        )
    own = [cwd]
    if spec.container.mount_home and account.home not in ("", "/"):
        own.append(account.home)
    own.append(str(spec.checkpoint_dir))
    if spec.app_dir is not None:
        own.append(str(spec.app_dir))
    mounts = [Mount(p, p) for p in dict.fromkeys(own) if p not in ("", "/")]  # never the root
    if spec.script_path is not None:
        mounts.append(Mount(str(spec.script_path), str(spec.script_path), readonly=True))
    own_count = len(mounts)  # the job's own paths: mounted unchecked, at the same place
    taken = {m.dst for m in mounts}
    mounts += [m for m in spec.container.mounts if m.dst not in taken]
    devices, gpu_line = gpu_devices(gpu_minors, dev)
    rdma = rdma_devices()
    _, ulimit_note = ulimit_args()
    notes = [gpu_line] + ([f"RDMA: {len(rdma)} devices"] if rdma else [])
    notes += [ulimit_note] if ulimit_note else []
    return ContainerTask(
        image=spec.container.image,
        name=container_name(step, rank),
        step=step,
        workdir=spec.container.workdir or cwd,
        mounts=tuple(mounts),
        allowed=tuple(spec.container_allowed),
        own_mounts=own_count,
        devices=tuple(devices + rdma),
        cgroup_parent=cgroup_parent,
        env_names=spec.container.env,
        notes=tuple(notes),
        ready_file=ready_file,
        pull=spec.container.pull,
    )


def step_launcher(
    spec: LaunchSpec,
    *,
    step: str,
    gpu_minors: Sequence[int],
    account: Account,
    cwd: str,
    containment: Containment,
    records: Path,
    ntasks: int,
    dev: Path = Path("/dev"),
) -> StepLauncher | None:
    """What a bare batch step's ``srun --container-image`` steps may have (`exec.task.stepd`): the
    container this job would get with ``--container-image`` (its own paths, its GPUs, its
    cgroup, its queue's prefixes), the image and home left to each step. None where no
    step can run in a container: not a bare batch script, not root, no Podman, no cgroup."""
    if not spec.batch or spec.container is not None or os.geteuid() != 0:
        return None
    track_group, cgroup_parent = containment.tracking.group(step), containment.cgroup_parent(step)
    if track_group is None or cgroup_parent is None or available() is not None:
        return None
    bare = replace(spec, container=ContainerSpec(image="", mount_home=False))
    template = container_task(bare, step=step, rank=0, gpu_minors=gpu_minors, account=account,
                              cwd=cwd, cgroup_parent=cgroup_parent, dev=dev)  # fmt: skip
    return StepLauncher(
        socket=str(socket_path(step)),
        template=template,
        home=account.home,
        track_group=str(track_group),
        max_tasks=ntasks,
        names_file=str(names_path(records, spec.restart_count)),
    )
