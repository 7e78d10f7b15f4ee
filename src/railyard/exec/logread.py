"""Reading a job's log with the job's user's rights, never root's: ``railyard logs``.

The control plane runs as root, and a log's path is the user's choice (``--output``), so it
must not open it itself: a ``..`` or a symlink would hand out any file on the machine. Here a
forked child drops to the job's account (supplementary groups, then gid, then uid, as the
wrapper does before it runs the job) and opens the path with ``O_NOFOLLOW|O_NONBLOCK``; the
descriptor comes back over a Unix socket (``SCM_RIGHTS``), so the kernel checked the access as
the user. The parent then refuses anything but a regular file, and any file the job's own
wrapper did not create: the wrapper records the (device, inode) of the files it wrote the
job's output to (:mod:`railyard.exec.task.outputs`), and only those are read. Each read is one
bounded
``pread``, so a FIFO or a ``/proc`` file can never hang or loop the server. When this process
already is the job's account (single-user mode) nothing is forked.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from railyard.exec.task.identity import Account

OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
OPEN_TIMEOUT_S = 10.0  # a path on a hung file system: the reader gives up, the server goes on


class LogRefused(Exception):
    """A log that must not be shown (one line: which file, and why)."""


@dataclass(frozen=True)
class LogSource:
    """Where one process's log is and how it may be read. ``user``: the Unix account that reads
    it (None: this process's own). ``outputs``: the wrapper's record of the files it created,
    the only ones shown. ``anchor``: instead, the spool log, a file the executor created in
    directories of its own under ``anchor``: opened one component at a time from there, none
    of them followed if it is a symlink, with this process's rights."""

    path: str
    user: str | None
    outputs: str | None
    anchor: str | None = None


def recorded_outputs(path: Path) -> set[tuple[int, int]] | None:
    """The (device, inode) pairs a rank's wrapper recorded; None when it has not (yet)."""
    try:
        data = json.loads(path.read_text())
        return {(int(dev), int(ino)) for dev, ino in data["files"]}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        raise LogRefused(f"the record of the job's output files ({path}) is unreadable") from None


def read_chunk(source: LogSource, offset: int, limit: int) -> tuple[bytes, int] | None:
    """Up to ``limit`` bytes from ``offset`` and the file's size; None: no such file yet.
    Raises LogRefused for anything the job's user may not read, or that is not the job's."""
    allowed: set[tuple[int, int]] | None = None
    if source.outputs is not None:
        allowed = recorded_outputs(Path(source.outputs))
        if allowed is None:
            return None  # the wrapper has not opened its output yet
    if source.anchor is not None:
        fd = open_under(source.anchor, source.path)
    elif source.outputs is None:
        raise LogRefused(f"{source.path}: no record of the job's output files; not shown")
    else:
        fd = open_as(source.path, source.user)
    if fd is None:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LogRefused(f"{source.path} is not a regular file; not shown")
        if allowed is not None and (info.st_dev, info.st_ino) not in allowed:
            raise LogRefused(f"{source.path} is not a file this job wrote; not shown")
        if offset > info.st_size:
            return b"", info.st_size
        return os.pread(fd, limit, offset), info.st_size
    finally:
        os.close(fd)


def open_as(path: str, user: str | None) -> int | None:
    """A descriptor of ``path`` opened with ``user``'s rights; None: no such file."""
    account = Account.current() if user is None else Account.lookup(user)
    if account.is_self:
        return _open(path)
    groups = os.getgrouplist(account.name, account.gid)  # NSS in the parent, never the child
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the child: syscalls only, then _exit; never returns into the server
        try:
            parent.close()
            os.setgroups(groups)
            os.setresgid(account.gid, account.gid, account.gid)
            os.setresuid(account.uid, account.uid, account.uid)
            try:
                fd = os.open(path, OPEN_FLAGS)
            except OSError as exc:
                child.sendall(f"E{exc.errno}".encode())
            else:
                socket.send_fds(child, [b"F"], [fd])
        finally:
            os._exit(0)
    child.close()
    try:
        parent.settimeout(OPEN_TIMEOUT_S)
        try:
            message, fds, _, _ = socket.recv_fds(parent, 64, 1)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            raise LogRefused(f"cannot read {path}: no answer in {OPEN_TIMEOUT_S:g} s") from None
    finally:
        parent.close()
        os.waitpid(pid, 0)
    if fds:
        return fds[0]
    _refuse_errno(path, message)
    return None


def open_under(anchor: str, path: str) -> int | None:
    """``path`` opened from a descriptor of ``anchor``, each component with ``O_NOFOLLOW``
    (and each directory with ``O_DIRECTORY``); None: no such file."""
    parts = Path(path).relative_to(anchor).parts if Path(path).is_relative_to(anchor) else None
    if not parts or ".." in parts:
        raise LogRefused(f"{path} is not under {anchor}; not shown")
    try:
        fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LogRefused(_why(anchor, exc.errno)) from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = OPEN_FLAGS if last else OPEN_FLAGS | os.O_DIRECTORY
            child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
    except FileNotFoundError:
        os.close(fd)
        return None
    except OSError as exc:
        os.close(fd)
        raise LogRefused(_why(path, exc.errno)) from None
    return fd


def _open(path: str) -> int | None:
    try:
        return os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LogRefused(_why(path, exc.errno)) from None


def _refuse_errno(path: str, message: bytes) -> None:
    """Say why the job's user cannot open ``path``; returns for a file not there (yet)."""
    try:
        code = int(message.decode()[1:])
    except ValueError:
        raise LogRefused(f"cannot read {path}: the reader failed") from None
    if code != errno.ENOENT:
        raise LogRefused(_why(path, code))


def _why(path: str, code: int | None) -> str:
    if code == errno.ELOOP:  # O_NOFOLLOW met a symlink
        return f"{path} is a symbolic link; not followed"
    return f"cannot read {path}: {os.strerror(code or errno.EIO)}"
