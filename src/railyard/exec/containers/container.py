"""A job's container (Pyxis's ``--container-*`` options) and the Podman command that runs one
of its processes in it.

Every process of a containerised job is one ``podman run`` started by its wrapper
(:mod:`railyard.exec.containers.containerrun`), so the launch contract is the bare one: the same
environment (``SLURM_*``, ``LOCAL_RANK``, ``CUDA_VISIBLE_DEVICES``, torchrun's variables),
signals proxied to the task by Podman, output files opened by the wrapper as the user, the
start marker claimed before anything runs. What the container adds, and why:

- ``--user UID:GID`` and ``--group-add`` for each supplementary group, ``--cap-drop all`` and
  ``no-new-privileges``: the task is the user, and a setuid binary of the image gains
  nothing (the kernel's ``no_new_privs``, which ``execve`` honours).
- host network, IPC, PID and UTS namespaces, as enroot gives Pyxis jobs: NCCL finds the
  NICs and the other ranks' shared memory, and torchrun its rendezvous address.
- the image's entrypoint is not run (Pyxis's default): the job's command is the task.
- ``--cgroup-parent`` the step's tracking group: the runtime makes the task's cgroups below
  it, so cancel, time limits and kill -9 of the server end the container like any process
  of the step (``cgroup.kill`` takes the subtree).
- only the job's GPUs as devices (the NVIDIA container toolkit's CDI names where its spec is
  installed), RDMA devices where the node has them; the container's own devices cgroup
  admits nothing else.
- ulimits passed explicitly: rootful Podman raises ``nofile`` and ``nproc`` by default,
  which a container host without ``CAP_SYS_RESOURCE`` refuses; railyard passes what this
  process has (``nproc`` capped at ``kernel.pid_max``, Podman's cap for its monitor).

Podman reference: https://docs.podman.io/en/v4.3/markdown/podman-run.1.html ; Pyxis's
options: https://github.com/NVIDIA/pyxis/wiki/Usage .
"""

from __future__ import annotations

import ipaddress
import os
import re
import resource
import shutil
import socket
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PODMAN = "podman"
PID_MAX = Path("/proc/sys/kernel/pid_max")
CDI_SPECS = (Path("/etc/cdi/nvidia.yaml"), Path("/var/run/cdi/nvidia.yaml"))
RDMA_DIR = Path("/dev/infiniband")
NVIDIA_SHARED = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
STAGE_ROOT = Path("/run/railyard/containers")  # root's own: mount sources pinned per task
IMAGE_CACHE = Path("/run/railyard/images")  # root's own: archives loaded on this node
NAME_PREFIX = "railyard-"
LABEL = "railyard.step"
ARCHIVE_TRANSPORTS = ("docker-archive:", "oci-archive:")
# Transports that read a path (or a daemon) as the runtime, root: a user may not name them.
# An archive is opened by the user first (containerrun); a plain name or docker:// pulls.
REFUSED_TRANSPORTS = ("dir:", "oci:", "docker-daemon:", "containers-storage:", "ostree:",
                      "sif:", "tarball:")  # fmt: skip
# A user's archive is loaded under a name of this repository (its tags are replaced), so it
# never takes, moves or removes a name another job uses; no job may ask for these by name.
ARCHIVE_REPO = "localhost/railyard-archive"
# What podman would read as an image id (or a prefix of one), which names no image of the
# job's own: another user's archive is run by its id.
IMAGE_ID = re.compile(r"(sha256:)?[0-9a-f]{3,64}")
DEFAULT_DOMAIN = "docker.io"  # where a short name (no registry) is pulled from


def image_problem(image: str) -> str | None:
    """Why ``image`` may not be asked for (None when it may): a transport that would make the
    root runtime read a path, an archive path that is not absolute, an image id or an
    archive's private name (another user's image), or what no name is."""
    if not image or image.startswith("-") or any(c.isspace() or not c.isprintable()
                                                 for c in image):  # fmt: skip
        return "an image reference has no spaces and no leading '-'"
    if image.startswith(REFUSED_TRANSPORTS):
        return "give an image name, docker://NAME, docker-archive:PATH or oci-archive:PATH"
    for transport in ARCHIVE_TRANSPORTS:
        if image.startswith(transport):
            path = image.removeprefix(transport)
            if not path.startswith("/"):
                return f"{transport} takes an absolute path"
            if "," in path or ":" in path:
                return f"{transport} takes a path without ':' or ','"
            return None
    name = image.removeprefix("docker://")
    if IMAGE_ID.fullmatch(name):
        return "name an image by REPOSITORY[:TAG], not by its id"
    if name.startswith((ARCHIVE_REPO + "/", ARCHIVE_REPO.removeprefix("localhost/") + "/")):
        return f"{ARCHIVE_REPO}/ names users' archives; give the archive's path instead"
    return None


def registry_host(image: str) -> str | None:
    """The registry a name would be pulled from (``host[:port]``, as written), None for an
    archive; a short name's is :data:`DEFAULT_DOMAIN` (Docker's rule: a first component with
    no '.' or ':' that is not ``localhost`` is a path)."""
    if image.startswith(ARCHIVE_TRANSPORTS):
        return None
    name = image.removeprefix("docker://")
    first, slash, _ = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return DEFAULT_DOMAIN


def pull_reference(image: str) -> str:
    """The fully qualified name to pull (never a short name: the node's search list would
    pick the registry)."""
    name = image.removeprefix("docker://")
    host = registry_host(image)
    if host == DEFAULT_DOMAIN and not name.startswith(DEFAULT_DOMAIN + "/"):
        return f"{DEFAULT_DOMAIN}/{name if '/' in name else 'library/' + name}"
    return name


def _bare_host(host: str) -> str:
    """``host[:port]`` without its port (and an IPv6 literal without its brackets)."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def may_pull(image: str, registries: Iterable[str]) -> bool:
    """Whether the admin's list lets a node pull ``image``: its registry, as written or
    without its port, is listed. The default (no list) is the node's own images only."""
    host = registry_host(image)
    if host is None:
        return False
    listed = {r.lower().rstrip("/") for r in registries}
    return host.lower() in listed or _bare_host(host).lower() in listed


def internal_host(host: str) -> str | None:
    """What kind of internal address ``host`` names (loopback, link-local, private...), or
    None for a public-looking one. Literal addresses (the resolver's IPv4 shorthands too) and
    ``localhost`` only: a name is never resolved here, and an unlisted host is never dialled
    whatever it resolves to."""
    bare = _bare_host(host).lower()
    if bare == "localhost" or bare.endswith(".localhost"):
        return "a loopback host"
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(bare)
    except ValueError:
        try:  # the resolver's shorthands too: 127.1, 0x7f.0.0.1, 2130706433
            address = ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    kinds = (
        ("a loopback", address.is_loopback),
        ("a link-local", address.is_link_local),
        ("a private", address.is_private),
        ("an unspecified", address.is_unspecified),
        ("a multicast", address.is_multicast),
        ("a reserved", address.is_reserved),
    )
    for kind, flag in kinds:
        if flag:
            return f"{kind} address"
    return None


def registry_problem(image: str, registries: Sequence[str]) -> str | None:
    """Why ``image`` may not be asked for on this cluster (None: it may): a registry on a
    loopback, link-local or private host the admin did not list. ``localhost/NAME`` with no
    port is Podman's own namespace for images built or imported on the node, never pulled."""
    host = registry_host(image)
    if host is None or host == "localhost" or may_pull(image, registries):
        return None
    kind = internal_host(host)
    if kind is None:
        return None
    return (
        f"{image}: registry {host} is {kind}, and this cluster pulls from "
        f"{', '.join(registries) or 'no registry (its nodes run their own images only)'}"
    )


def path_separator_problem(path: str) -> str | None:
    """Why ``path`` cannot be a container's mount or workdir (None: it can): ':' and ','
    separate a volume's fields (a ``:U`` would make the runtime chown a host path)."""
    if ":" in path or "," in path:
        return f"{path!r} has ':' or ',', which a container mount cannot carry"
    return None


def nested_problem(path: str, mounts: Iterable[Mount], what: str) -> str | None:
    """Why ``path`` (``what``: workdir, a mount's destination) would be made on the host
    (None when it would not): it lies strictly below another mount's destination, so the
    root runtime would create it in the host directory mounted there, not in the image."""
    for mount in mounts:
        if path != mount.dst and mount.dst != "/" and under(path, mount.dst):
            return (
                f"{what} {path} is inside {mount.dst}, a host directory mounted in the "
                "container: the runtime would create it there as root"
            )
    return None


IMAGE_OWNED_ENV = ("PATH", "LD_LIBRARY_PATH")  # the image's value wins unless --container-env


@dataclass(frozen=True)
class Mount:
    """``SRC:DST[:ro]``: a host path (opened as the user) at ``dst`` in the container."""

    src: str
    dst: str
    readonly: bool = False

    def to_text(self) -> str:
        return f"{self.src}:{self.dst}" + (":ro" if self.readonly else "")


def parse_mounts(text: str) -> list[Mount]:
    """Pyxis's ``--container-mounts`` value: ``SRC[:DST[:ro|rw]],...``; ValueError names the
    bad entry."""
    mounts = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        parts = entry.split(":")
        if len(parts) > 3:
            raise ValueError(f"{entry!r}: expected SRC[:DST[:ro|rw]]")
        src = parts[0]
        dst = parts[1] if len(parts) > 1 and parts[1] else src
        flag = parts[2] if len(parts) == 3 else "rw"
        if flag not in ("ro", "rw"):
            raise ValueError(f"{entry!r}: the flag is ro or rw, not {flag!r}")
        for what, path in (("source", src), ("destination", dst)):
            if not path.startswith("/") or "\0" in path or "/../" in f"{path}/":
                raise ValueError(f"{entry!r}: the {what} must be an absolute path without '..'")
        mounts.append(Mount(os.path.normpath(src), os.path.normpath(dst), flag == "ro"))
    return mounts


@dataclass(frozen=True)
class ContainerSpec:
    """What a job asked for: ``image`` (a name the node has or can pull, or a
    ``docker-archive:``/``oci-archive:`` path), extra ``mounts``, the ``workdir`` in the
    container ('' : the job's working directory), ``env`` names whose job value beats the
    image's, and whether the user's home is mounted."""

    image: str
    mounts: tuple[Mount, ...] = ()
    workdir: str = ""
    env: tuple[str, ...] = ()
    mount_home: bool = True
    pull: bool = False  # the admin's registries list this image's at submit (`may_pull`)

    def to_dict(self) -> dict[str, Any]:
        return {"image": self.image, "mounts": [m.to_text() for m in self.mounts],
                "workdir": self.workdir, "env": list(self.env),
                "mount_home": self.mount_home, "pull": self.pull}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContainerSpec:
        return cls(
            image=str(data["image"]),
            mounts=tuple(parse_mounts(",".join(str(m) for m in data.get("mounts", ())))),
            workdir=str(data.get("workdir", "")),
            env=tuple(str(n) for n in data.get("env", ())),
            mount_home=bool(data.get("mount_home", True)),
            pull=bool(data.get("pull", False)),
        )


@dataclass(frozen=True)
class ContainerTask:
    """One process's container, as the wrapper runs it (in the task file): the image, every
    mount (home and the working directory included), the devices, the cgroup parent, the
    prefixes a mount's real path must lie under, and the container's name."""

    image: str
    name: str
    step: str
    workdir: str
    mounts: tuple[Mount, ...] = ()
    own_mounts: int = 0  # the first ones are the job's own paths, not checked against allowed
    allowed: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    cgroup_parent: str = ""
    env_names: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    ready_file: str = ""  # written once the image is on the node (`exec.attempt.mark_ready`)
    pull: bool = False  # may pull the image when the node lacks it (`ContainerSpec.pull`)

    def to_dict(self) -> dict[str, Any]:
        return {"image": self.image, "name": self.name, "step": self.step,
                "workdir": self.workdir, "mounts": [m.to_text() for m in self.mounts],
                "own_mounts": self.own_mounts, "allowed": list(self.allowed),
                "devices": list(self.devices),
                "cgroup_parent": self.cgroup_parent, "env_names": list(self.env_names),
                "notes": list(self.notes), "ready_file": self.ready_file,
                "pull": self.pull}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContainerTask:
        return cls(
            image=str(data["image"]),
            name=str(data["name"]),
            step=str(data["step"]),
            workdir=str(data["workdir"]),
            mounts=tuple(parse_mounts(",".join(str(m) for m in data.get("mounts", ())))),
            own_mounts=int(data.get("own_mounts", 0)),
            allowed=tuple(str(a) for a in data.get("allowed", ())),
            devices=tuple(str(d) for d in data.get("devices", ())),
            cgroup_parent=str(data.get("cgroup_parent", "")),
            env_names=tuple(str(n) for n in data.get("env_names", ())),
            notes=tuple(str(n) for n in data.get("notes", ())),
            ready_file=str(data.get("ready_file", "")),
            pull=bool(data.get("pull", False)),
        )


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or lies below it (``/data2`` is not under ``/data``)."""
    prefix = prefix.rstrip("/") or "/"
    return path == prefix or path.startswith(prefix if prefix == "/" else prefix + "/")


def container_name(step: str, rank: int) -> str:
    """The name of one rank's container: unique per step (job, attempt, node) and rank."""
    return f"{NAME_PREFIX}{step}-{rank}"


def available() -> str | None:
    """Why this node cannot run containers (None when Podman is here)."""
    return None if shutil.which(PODMAN) else "no container runtime here (podman is not installed)"


def gpu_devices(minors: Iterable[int], dev: Path = Path("/dev")) -> tuple[list[str], str]:
    """The ``--device`` values for the job's GPUs, and the line that says how: CDI names when
    the NVIDIA container toolkit's spec is installed (it also injects the driver's libraries),
    else the device files that exist here."""
    minors = list(minors)
    if any(spec.is_file() for spec in CDI_SPECS):
        return [f"nvidia.com/gpu={m}" for m in minors], "GPUs: NVIDIA CDI devices"
    names = [f"nvidia{m}" for m in minors if (dev / f"nvidia{m}").exists()]
    if not names:
        return [], "GPUs: none"
    names += [name for name in NVIDIA_SHARED if (dev / name).exists()]
    files = [f"{dev / name}:/dev/{name}" for name in names]
    return files, (
        "GPUs: device files only (no NVIDIA CDI spec in /etc/cdi or /var/run/cdi: the image "
        "must bring the driver's user libraries)"
    )


def rdma_devices(root: Path = RDMA_DIR) -> list[str]:
    """Every RDMA device of the node (``/dev/infiniband/*``), passed as the host passes them."""
    try:
        return sorted(str(p) for p in root.iterdir())
    except OSError:
        return []


def ulimit_args() -> tuple[list[str], str]:
    """``--ulimit`` for nofile and nproc as this process has them (see the module's note)."""
    args = []
    notes = []
    try:
        pid_max = int(PID_MAX.read_text())
    except (OSError, ValueError):
        pid_max = 0
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(which)
        if name == "nproc" and pid_max:
            capped = [pid_max if v in (resource.RLIM_INFINITY, -1) or v > pid_max else v
                      for v in (soft, hard)]  # fmt: skip
            if capped != [soft, hard]:
                notes.append(f"nproc capped at kernel.pid_max {pid_max}")
            soft, hard = capped
        spell = ["-1" if v == resource.RLIM_INFINITY else str(v) for v in (soft, hard)]
        args += ["--ulimit", f"{name}={spell[0]}:{spell[1]}"]
    return args, "; ".join(notes)


def run_args(
    task: ContainerTask,
    *,
    uid: int,
    gid: int,
    groups: Sequence[int],
    env_file: str,
    volumes: Sequence[tuple[str, Mount]],
    command: Sequence[str],
    image: str,
    passwd: str = "",
) -> list[str]:
    """The ``podman run`` command line of one process (``volumes``: staged source, mount;
    ``passwd``: the user's ``/etc/passwd`` line, so ``id`` and ``~`` name them)."""
    args = [PODMAN, "run", "--rm", "--pull", "never", "--name", task.name,
            "--label", f"{LABEL}={task.step}", "--log-driver", "none",
            "--user", f"{uid}:{gid}", "--cap-drop", "all",
            "--security-opt", "no-new-privileges",
            "--network", "host", "--ipc", "host", "--pid", "host", "--uts", "host",
            "--env-file", env_file, "--http-proxy=false", "--workdir", task.workdir,
            "--entrypoint", ""]  # fmt: skip
    if passwd:
        args += ["--passwd-entry", passwd]
    for group in groups:
        if group != gid:
            args += ["--group-add", str(group)]
    if task.cgroup_parent:
        args += ["--cgroup-parent", task.cgroup_parent]
    args += ulimit_args()[0]
    for device in task.devices:
        args += ["--device", device]
    for staged, mount in volumes:
        if path_separator_problem(staged) or path_separator_problem(mount.dst):
            raise ValueError(f"container mount {mount.dst!r}: ':' or ',' in a volume's path")
        args += ["--volume", f"{staged}:{mount.dst}" + (":ro" if mount.readonly else "")]
    return [*args, image, *command]


def container_env(
    job_env: Mapping[str, str], image_env_names: Iterable[str], keep: Iterable[str]
) -> dict[str, str]:
    """What the task gets on top of the image's environment, as Pyxis does: every variable of
    the job except the ones the image sets itself (its value wins), unless named in ``keep``
    (``--container-env``). PATH and LD_LIBRARY_PATH are always the image's unless kept."""
    image_owned = set(image_env_names) | set(IMAGE_OWNED_ENV)
    kept = set(keep)
    return {k: v for k, v in job_env.items() if k in kept or k not in image_owned}


def remove_containers(names: Sequence[str], *, timeout_s: float = 60.0) -> bool:
    """Remove what is left of these containers (a task killed with its runtime leaves its
    container's record behind); quiet when there is nothing. False when the runtime failed
    (tried again later by the caller); raises ``subprocess.TimeoutExpired`` past
    ``timeout_s``."""
    if not names or shutil.which(PODMAN) is None:
        return True
    done = subprocess.run(
        [PODMAN, "rm", "--force", "--ignore", "--time", "0", *names],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"},
        timeout=timeout_s,
        check=False,
    )
    return done.returncode == 0
