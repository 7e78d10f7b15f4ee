"""In the wrapper's child: start one process of a job in its container (:mod:`.container`).

The runtime runs as root, so nothing it is handed may be a path the user can steer. The
child therefore does the user's part as the user, with only its *effective* ids switched
(:func:`become_user_effective`; the real and saved ids stay root): it changes to the working
directory, opens the output files, and opens every mount source with ``O_PATH`` under the
user's rights, which pins the file the user can reach and no other (a symlink swapped in
later changes nothing). Then, root again, it unshares its mount namespace (the runtime and
its monitor inherit it), puts a private tmpfs over :data:`~.container.STAGE_ROOT` and binds
each pinned source there through ``/proc/self/fd/N``; the runtime mounts those root-owned
staged paths. A mount whose real path is outside what the queue allows stops the task.

The runtime gets a fixed environment (never the user's: ``CONTAINERS_CONF`` or ``TMPDIR``
would steer root's Podman), and the job's variables travel in an env file on that tmpfs.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from railyard.exec.attempt import mark_ready
from railyard.exec.containers.archives import ArchiveError, rename_archive
from railyard.exec.containers.container import (
    ARCHIVE_REPO,
    ARCHIVE_TRANSPORTS,
    IMAGE_CACHE,
    PODMAN,
    STAGE_ROOT,
    ContainerTask,
    Mount,
    container_env,
    image_problem,
    pull_reference,
    registry_host,
    run_args,
    under,
)
from railyard.exec.task.identity import Account

RUNTIME_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/root"}
CLONE_NEWNS = 0x00020000  # <sched.h>
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8  # <sys/mount.h>
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
EXEC_FAILED = 127
PULL_TIMEOUT_S = 3600.0  # sched.model.PULL_LIMIT_S: a job's time limit starts by then


class Refused(Exception):
    """The task cannot start in its container; the message is the one line that says why.
    ``reason``: the job's reason when it ends so (None: its exit code says it)."""

    reason: str | None = None


class ImagePullFailed(Refused):
    """The image is not on this node and cannot be pulled or loaded: the job ends with
    reason ``ImagePullFailed: ...`` (as Kubernetes says it), not a command's exit 127."""

    reason = "ImagePullFailed"


def become_user_effective(account: Account) -> list[int]:
    """Take the user's groups and effective ids (real and saved stay root, to come back);
    returns the user's groups."""
    groups = os.getgrouplist(account.name, account.gid)
    os.setgroups(groups)
    os.setresgid(-1, account.gid, -1)
    os.setresuid(-1, account.uid, -1)
    return groups


def become_root_again() -> None:
    os.setresuid(-1, 0, -1)
    os.setresgid(-1, 0, -1)
    os.setgroups([])


def pin(mounts: Sequence[Mount], allowed: Sequence[str], own: int = 0) -> list[tuple[int, Mount]]:
    """Open each mount source as the (effective) user; a source that cannot be opened, or
    (after the first ``own``, the job's own paths) whose real path lies outside
    ``allowed``, is refused."""
    pinned = []
    for index, mount in enumerate(mounts):
        try:
            fd = os.open(mount.src, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            if index < own:  # a user without a home directory: nothing to mount
                continue
            raise Refused(f"container mount {mount.src}: no such file or directory") from None
        except OSError as exc:
            raise Refused(f"container mount {mount.src}: {exc.strerror or exc}") from None
        real = os.readlink(f"/proc/self/fd/{fd}")
        if index >= own and not any(under(real, prefix) for prefix in allowed):
            raise Refused(
                f"container mount {mount.src} is {real}, outside what this job may mount "
                f"({', '.join(allowed) or 'no other path'})"
            )
        pinned.append((fd, mount))
    return pinned


def check_nested(workdir: str, pinned: Sequence[tuple[int, Mount]]) -> None:
    """Refuse a workdir or mount destination the runtime would create on the host: one inside
    another mount's destination is walked from that mount's pinned source, as the (effective)
    user, component by component without following links, and must exist. (runc makes a
    missing one as root in the host directory mounted there; the API refuses the ones a
    job names, this covers what reaches the runtime all the same.)"""
    wanted = [("workdir", workdir, None)] + [("mount", m.dst, m) for _, m in pinned]
    for what, path, own in wanted:
        below = [(fd, m) for fd, m in pinned if m is not own and m.dst != path
                 and m.dst != "/" and under(path, m.dst)]  # fmt: skip
        if not below:
            continue  # in the image's own tree
        fd, outer = max(below, key=lambda pair: len(pair[1].dst))
        current = os.dup(fd)
        try:
            for part in os.path.relpath(path, outer.dst).split("/"):
                try:
                    step = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
                except OSError as exc:
                    raise Refused(
                        f"container {what} {path}: {exc.strerror or exc} in the host directory "
                        f"mounted at {outer.dst} (the runtime would create it there as root; "
                        "create it first, or use a path in the image)"
                    ) from None
                os.close(current)
                current = step
                if stat.S_ISLNK(os.fstat(current).st_mode):
                    raise Refused(f"container {what} {path}: a symbolic link in the host "
                                  f"directory mounted at {outer.dst}")  # fmt: skip
        finally:
            os.close(current)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount(libc: ctypes.CDLL, src: str | None, dst: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:  # fmt: skip
    if libc.mount(src and src.encode(), dst.encode(), fstype and fstype.encode(), flags,
                  data and data.encode()) != 0:  # fmt: skip
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), dst)


def private_namespace() -> None:
    """A mount namespace of this process's own (the runtime inherits it) with a private
    tmpfs over the stage directory. Needs root; done before the sources are pinned, since a
    bind mount takes only a source of the caller's namespace."""
    libc = _libc()
    STAGE_ROOT.mkdir(mode=0o700, parents=True, exist_ok=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    _mount(libc, "tmpfs", str(STAGE_ROOT), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700")


def stage(pinned: Sequence[tuple[int, Mount]]) -> list[tuple[str, Mount]]:
    """Each pinned source bound under the stage directory (in :func:`private_namespace`);
    returns (staged path, mount) pairs for the runtime. Needs root."""
    libc = _libc()
    staged = []
    for i, (fd, mount) in enumerate(pinned):
        target = STAGE_ROOT / f"m{i}"
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            target.mkdir(mode=0o700)
        else:
            target.touch(mode=0o600)
        _mount(libc, f"/proc/self/fd/{fd}", str(target), None, MS_BIND | MS_REC)
        os.close(fd)
        staged.append((str(target), mount))
    return staged


def ensure_image(
    image: str,
    archive_fd: int | None,
    say: Callable[[str], None],
    *,
    pull: bool = False,
    owner: int = 0,
) -> tuple[str, list[str]]:
    """The image's id on this node (loading ``owner``'s archive the first time, or pulling a
    name the node lacks where ``pull``: the admin's registries list its registry) and the
    names of the variables it sets. A name the node has is never pulled again, and no load
    changes what a name means (:func:`_load_archive`)."""
    if archive_fd is not None:
        with _images_lock():
            found = _inspect(_load_archive(image, archive_fd, say, owner))
        if found is None:
            raise Refused(f"image {image}: loaded, but podman cannot find it")
        return found
    found = _inspect(image.removeprefix("docker://"))
    if found is not None:
        return found
    host = registry_host(image)
    if not pull:
        raise Refused(
            f"image {image}: not on this node, and this cluster does not pull from {host} "
            "(hint: use an image the nodes have, or ask an admin: railyard up "
            "--container-registry HOST)"
        )
    reference = pull_reference(image)
    say(f"railyard: pulling image {reference}")
    began = time.monotonic()
    pulled = _podman(["pull", "--quiet", reference], timeout_s=PULL_TIMEOUT_S)
    if pulled.returncode != 0:
        raise Refused(f"image {image}: cannot pull it: {_last_line(pulled.stderr)}")
    say(f"railyard: pulled image {reference} in {time.monotonic() - began:.1f} s")
    found = _inspect(reference)
    if found is None:
        raise Refused(f"image {image}: pulled, but podman cannot find it")
    return found


@contextlib.contextmanager
def _images_lock() -> Iterator[None]:
    """This node's lock between archive loads (two ranks of one archive load it once)."""
    IMAGE_CACHE.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(IMAGE_CACHE / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _inspect(ref: str) -> tuple[str, list[str]] | None:
    done = _podman(["image", "inspect", "--format", "{{.Id}} {{json .Config.Env}}", ref])
    if done.returncode != 0:
        return None
    image_id, _, env = done.stdout.strip().partition(" ")
    names = [item.partition("=")[0] for item in json.loads(env or "null") or ()]
    return image_id, names


def _load_archive(image: str, fd: int, say: Callable[[str], None], owner: int) -> str:
    """Load a ``docker-archive:``/``oci-archive:`` file (opened by the user) once per node
    and user; its id. The image's id is kept under the file's identity, so a changed archive
    loads again. The archive's own names (any name, another job's image's included) are
    replaced on the way in by one of :data:`ARCHIVE_REPO` (:func:`rename_archive`): a load
    never moves, adds or removes a name anyone asks for, and an archive of an image the node
    already has changes nothing of it."""
    info = os.fstat(fd)
    key = hashlib.sha256(
        f"{owner}:{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}".encode()
    ).hexdigest()[:32]
    cached = IMAGE_CACHE / key
    try:
        image_id = cached.read_text().strip()
        if _inspect(image_id) is not None:
            return image_id
    except OSError:
        pass
    say(f"railyard: loading image {image}")
    began = time.monotonic()
    private = f"{ARCHIVE_REPO}/{key}"
    out = _load_renamed(image, fd, private)
    said = [line.split(":", 1)[1] for line in out.splitlines()
            if line.startswith("Loaded image")]  # fmt: skip
    names = [name.strip() for line in said for name in line.split(",")]
    ours = [name for name in names if name.startswith(private + ":")]
    if not ours:
        raise Refused(f"image {image}: podman load named no image")
    found = _inspect(ours[-1])
    if found is None:
        raise Refused(f"image {image}: loaded, but podman cannot find it")
    cached.write_text(found[0])
    say(f"railyard: loaded image {image} in {time.monotonic() - began:.1f} s")
    return found[0]


def _load_renamed(image: str, fd: int, private: str) -> str:
    """``podman load`` of the archive at ``fd`` renamed to ``private`` on the way in; what it
    said on stdout (Refused when it fails)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        loading = subprocess.Popen([PODMAN, "load"], env=RUNTIME_ENV, stdin=subprocess.PIPE,
                                   stdout=out, stderr=err)  # fmt: skip
        assert loading.stdin is not None
        problem = ""
        try:
            with os.fdopen(os.dup(fd), "rb") as source, loading.stdin as sink:
                rename_archive(source, sink, private)
        except (ArchiveError, OSError) as exc:
            problem = str(exc)
            loading.kill()
        try:
            loading.wait(timeout=PULL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            loading.kill()
            loading.wait()
            problem = problem or f"podman load took over {PULL_TIMEOUT_S:.0f} s"
        out.seek(0)
        err.seek(0)
        stdout, stderr = (f.read().decode(errors="replace") for f in (out, err))
    if problem or loading.returncode != 0:
        raise Refused(f"image {image}: cannot load it: {problem or _last_line(stderr)}")
    return stdout


def _podman(args: list[str], pass_fds: Sequence[int] = (),
            timeout_s: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run([PODMAN, *args], env=RUNTIME_ENV, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, pass_fds=tuple(pass_fds),
                          timeout=timeout_s, check=False)  # fmt: skip


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def env_memfd(env: dict[str, str]) -> tuple[int, list[str]]:
    """The job's variables for ``--env-file`` in an anonymous file (a memfd the runtime
    inherits: nothing on disk, nothing in argv, where ``ps`` would show it to everyone);
    returns it and the names a line cannot carry (a value with a newline)."""
    skipped = [k for k, v in env.items() if "\n" in v or "\r" in v]
    text = "".join(f"{k}={v}\n" for k, v in env.items() if k not in skipped)
    fd = os.memfd_create("railyard-env", 0)  # no MFD_CLOEXEC: the runtime reads it
    os.write(fd, text.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd, skipped


def exec_podman(
    ctask: ContainerTask,
    account: Account | None,
    groups: Sequence[int],
    command: Sequence[str],
    env: dict[str, str],
    *,
    interactive: bool = False,
    pty: bool = False,
) -> NoReturn:
    """Called as the (effective) user after the outputs are open; never returns."""

    def say(line: str) -> None:
        os.write(2, (line + "\n").encode())

    for note in ctask.notes:
        say(f"railyard: container: {note}")
    problem = image_problem(ctask.image)
    if problem is not None:  # the API refuses these; a task file is checked again all the same
        raise Refused(f"image {ctask.image}: {problem}")
    privileged = os.getuid() == 0
    pinned = pin(ctask.mounts, ctask.allowed, ctask.own_mounts)
    check_nested(ctask.workdir, pinned)
    archive_fd = None
    for transport in ARCHIVE_TRANSPORTS:
        if ctask.image.startswith(transport):
            path = ctask.image.removeprefix(transport)
            try:
                archive_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise Refused(f"image {ctask.image}: {exc.strerror or exc}") from None
    if privileged:
        become_root_again()
    owner = account.uid if account is not None else os.geteuid()
    try:
        image_id, image_env = ensure_image(
            ctask.image, archive_fd, say, pull=ctask.pull, owner=owner
        )
    except ImagePullFailed:
        raise
    except Refused as exc:
        raise ImagePullFailed(str(exc)) from None
    if ctask.ready_file:  # its time limit starts now, not while the image was pulled
        try:
            mark_ready(Path(ctask.ready_file), time.time())
        except OSError as exc:
            say(f"railyard: container: cannot record that the image is ready: {exc.strerror}")
    # Single-user mode (not root): the runtime is the user's own; nothing to pin against.
    volumes = stage(pinned) if privileged else [(m.src, m) for _, m in pinned]
    env_fd, skipped = env_memfd(container_env(env, image_env, ctask.env_names))
    env_path = f"/proc/self/fd/{env_fd}"  # the runtime's own descriptor: it reads it at start
    if skipped:
        say(f"railyard: container: not passed (a newline in the value): {', '.join(skipped)}")
    account = account or Account.current()
    passwd = f"{account.name}:*:{account.uid}:{account.gid}:{account.name}:{account.home}:" + (
        account.shell or "/bin/sh"
    )
    args = run_args(ctask, uid=account.uid, gid=account.gid, groups=groups,
                    env_file=env_path, volumes=volumes, command=command, image=image_id,
                    passwd=passwd if ":" not in account.name + account.home else "")  # fmt: skip
    if interactive:
        args[2:2] = ["--interactive", *(["--tty"] if pty else [])]
    os.execve(_which(PODMAN), args, RUNTIME_ENV)


def _which(name: str) -> str:
    for folder in RUNTIME_ENV["PATH"].split(":"):
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    raise Refused(f"no {name} on this node")
