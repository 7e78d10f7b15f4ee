"""``srun --container-image=...`` in a bare batch script: the request a step makes, and what the
node's step launcher (:mod:`railyard.exec.task.stepd`) may grant it.

A batch script runs as its user, so its ``srun`` cannot start a rootful container. As Slurm's
srun asks slurmstepd, railyard's asks the batch step's wrapper, root, which listens on a Unix
socket in a root-owned directory (:data:`SOCKET_DIR`) for the job's processes alone. This
module is both ends' vocabulary: :class:`StepLauncher` (what the executor grants the step
launcher in the task file: the job's GPUs, mounts and cgroup, as a job-level container gets
them), :class:`StepRequest` (what srun asks for: an image, Pyxis's options, one environment
per task) with its wire format, and :func:`request_problem`, the submit-time rules again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from railyard.exec.containers.container import (
    ContainerTask,
    Mount,
    container_name,
    image_problem,
    parse_mounts,
    under,
)

SOCKET_VAR = "RAILYARD_STEP_SOCKET"  # where a batch script's srun asks for container steps
SOCKET_DIR = Path("/run/railyard-steps")  # root's own (0711): one socket per batch step
MAX_REQUEST = 4 << 20  # a request's bytes (the tasks' environments)
HELLO = b"railyard-step 1\n"  # the first bytes, sent with srun's stdout and stderr
MAX_IMAGE, MAX_MOUNTS = 1024, 64  # as the API's (`control.containerschema`)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def socket_path(step: str) -> Path:
    return SOCKET_DIR / f"{step}.sock"


def names_path(records: Path, restart_count: int) -> Path:
    """Where the launcher lists the step containers it started (root's records directory),
    so the executor removes what a killed runtime left when the job ends."""
    return records / f"step-containers-{restart_count}"


def leftovers(step: str | None, records: Path | None, restart_count: int) -> list[str]:
    """A step that ended: its socket removed (its launcher may have been killed first), and
    the names of the step containers its launcher started (for ``podman rm``)."""
    if step is not None:
        with contextlib.suppress(OSError):
            socket_path(step).unlink(missing_ok=True)
    try:
        return names_path(records, restart_count).read_text().split() if records else []
    except OSError:
        return []


@dataclass(frozen=True)
class StepLauncher:
    """What a bare batch step's launcher may give its ``srun`` steps (in the task file):
    ``template`` is a job-level container of the job with no image yet (the job's own paths
    as mounts, its GPUs as devices, its cgroup parent, the prefixes its queue allows);
    ``home`` is mounted unless a step declines; ``track_group`` is the step's tracking cgroup
    ('' : none, then a peer must descend from the wrapper); at most ``max_tasks`` per step."""

    socket: str
    template: ContainerTask
    home: str
    track_group: str
    max_tasks: int
    names_file: str

    def to_dict(self) -> dict[str, Any]:
        return {"socket": self.socket, "template": self.template.to_dict(), "home": self.home,
                "track_group": self.track_group, "max_tasks": self.max_tasks,
                "names_file": self.names_file}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepLauncher:
        return cls(
            socket=str(data["socket"]),
            template=ContainerTask.from_dict(data["template"]),
            home=str(data["home"]),
            track_group=str(data["track_group"]),
            max_tasks=int(data["max_tasks"]),
            names_file=str(data["names_file"]),
        )


@dataclass(frozen=True)
class StepRequest:
    """One ``srun --container-image`` step: Pyxis's options as srun read them, the directory
    srun ran in, its step id, and each task's rank and whole environment."""

    image: str
    command: tuple[str, ...] = ()
    mounts: str = ""
    workdir: str = ""
    env_names: tuple[str, ...] = ()
    mount_home: bool = True
    cwd: str = "/"
    step_id: int = 0
    tasks: tuple[tuple[int, dict[str, str]], ...] = field(default_factory=tuple)

    def to_bytes(self) -> bytes:
        data = {"image": self.image, "command": list(self.command), "mounts": self.mounts,
                "workdir": self.workdir, "env_names": list(self.env_names),
                "mount_home": self.mount_home, "cwd": self.cwd, "step_id": self.step_id,
                "tasks": [[rank, env] for rank, env in self.tasks]}  # fmt: skip
        return json.dumps(data).encode() + b"\n"

    @classmethod
    def from_bytes(cls, raw: bytes) -> StepRequest:
        """ValueError (or a KeyError/TypeError, the caller's ValueError) on anything malformed."""
        data = json.loads(raw)
        tasks = tuple(
            (int(rank), {str(k): str(v) for k, v in dict(env).items()})
            for rank, env in data["tasks"]
        )
        return cls(
            image=str(data["image"]),
            command=tuple(str(c) for c in data["command"]),
            mounts=str(data.get("mounts", "")),
            workdir=str(data.get("workdir", "")),
            env_names=tuple(str(n) for n in data.get("env_names", ())),
            mount_home=bool(data.get("mount_home", True)),
            cwd=str(data.get("cwd", "/")),
            step_id=int(data.get("step_id", 0)),
            tasks=tasks,
        )


NO_PREFIX = "nothing beyond home and the working directory"


def request_problem(request: StepRequest, launcher: StepLauncher) -> str | None:
    """Why the launcher refuses ``request`` (None: it may run), by the rules a job's own
    ``--container-*`` options meet at submit (`control.containerschema`,
    `control.usecases.containers`); the wrapper checks each mount's real path again."""
    problem = image_problem(request.image)
    if len(request.image) > MAX_IMAGE:
        problem = f"at most {MAX_IMAGE} characters"
    if problem is not None:
        return f"--container-image={request.image}: {problem}"
    try:
        mounts = parse_mounts(request.mounts)
    except ValueError as exc:
        return f"--container-mounts: {exc}"
    if len(mounts) > MAX_MOUNTS:
        return f"--container-mounts: {len(mounts)} mounts, at most {MAX_MOUNTS}"
    allowed = launcher.template.allowed
    for mount in mounts:
        if not any(under(mount.src, prefix) for prefix in allowed):
            return (
                f"--container-mounts: {mount.src} is outside what this job's queue lets "
                f"containers mount ({', '.join(allowed) or NO_PREFIX})"
            )
    if request.workdir and not request.workdir.startswith("/"):
        return f"--container-workdir={request.workdir}: not an absolute path"
    if not request.tasks:
        return "no tasks"
    if len(request.tasks) > launcher.max_tasks:
        return f"{len(request.tasks)} tasks, but the job has {launcher.max_tasks} on this node"
    if not all(ENV_NAME.fullmatch(n) for n in request.env_names):
        return "--container-env takes variable names"
    if not request.command:
        return "nothing to run"
    return None


def step_task(launcher: StepLauncher, request: StepRequest, rank: int) -> ContainerTask:
    """Rank ``rank``'s container of the step: the job's own paths (and home unless declined),
    then the step's mounts; its workdir the one asked for, else srun's directory where a
    mount brings it, else the job's."""
    template = launcher.template
    own = list(template.mounts[: template.own_mounts])
    home = launcher.home
    if request.mount_home and home not in ("", "/") and home not in {m.dst for m in own}:
        own.insert(1, Mount(home, home))
    taken = {m.dst for m in own}
    mounts = own + [m for m in parse_mounts(request.mounts) if m.dst not in taken]
    workdir = request.workdir
    if not workdir:
        inside = any(under(request.cwd, m.dst) for m in mounts)
        workdir = request.cwd if inside else template.workdir
    step = f"{template.step}-{request.step_id}"
    return replace(
        template,
        image=request.image,
        name=container_name(step, rank),
        workdir=workdir,
        mounts=tuple(mounts),
        own_mounts=len(own),
        env_names=request.env_names,
    )


def send_request(sock: socket.socket, request: StepRequest, fds: Sequence[int]) -> None:
    """srun's side: the hello with its output descriptors, then the request."""
    socket.send_fds(sock, [HELLO], list(fds))
    sock.sendall(request.to_bytes())


def read_request(conn: socket.socket) -> tuple[StepRequest, list[int]]:
    """The launcher's side: the request and srun's output descriptors (ValueError if
    malformed; the descriptors are closed then)."""
    hello, fds, _, _ = socket.recv_fds(conn, len(HELLO), 2)
    try:
        if hello != HELLO or len(fds) != 2:
            raise ValueError("not a railyard step request")
        chunks: list[bytes] = []
        size = 0
        while not (chunks and chunks[-1].endswith(b"\n")):
            chunk = conn.recv(65536)
            if not chunk:
                raise ValueError("the request ended early")
            size += len(chunk)
            if size > MAX_REQUEST:
                raise ValueError(f"a request is at most {MAX_REQUEST} bytes")
            chunks.append(chunk)
        return StepRequest.from_bytes(b"".join(chunks)), fds
    except (ValueError, KeyError, TypeError) as exc:
        for fd in fds:
            os.close(fd)
        raise ValueError(str(exc)) from None
