"""One door to a job's sockets: its terminal (``railyard run``, ``alloc``), a shell or an
``sshd -i`` started in one of its ranks (``railyard attach``, ``ssh job-N``), its web app
(``railyard jupyter``), wherever the job runs.

The control plane's three bridges (the terminal WebSocket, the SSH WebSocket, the dashboard's
app proxy) ask :func:`connect` for a connected socket and never care where the job is: on
this machine the socket is reached here (:func:`connect_here`); on another machine (a Ray
node) the backend's :data:`SocketOpener` asks that node's agent to do the very same
:func:`connect_here` there and hands back a relayed byte stream
(:mod:`railyard.exec.terminals.relay`).
So the checks are made where the socket is, by the same code: a terminal socket in the
attempt's records directory, which root owns; an app's socket opened ``O_PATH|O_NOFOLLOW``
and its listener checked to be the job's account (:mod:`railyard.exec.terminals.appsocket`).

Identity: whoever calls this is root (the control plane, or a node's agent); nothing here
opens a path a user controls except through ``appsocket``'s pinning, and a shell is started
as the job's account by the wrapper (:mod:`railyard.exec.terminals.attach`).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from railyard.exec.protocol import ExecutorError
from railyard.exec.task.taskfile import Task
from railyard.exec.terminals import appsocket, attach, sshd, terminal

CONNECT_WAIT_S = 10.0  # from the job's start to its wrapper's listening socket
ATTACH_LINGER_S = 5.0  # an attached shell whose client is gone is hung up after this
KINDS = ("terminal", "app", "attach")


@dataclass(frozen=True)
class JobSocket:
    """Which socket of which job, and on which machine (sent to a node's agent as is).

    ``kind``: ``terminal`` (``path``: the wrapper's socket of rank 0), ``app`` (``path``: the
    app's socket, ``port``: its loopback port, ``user``: the account that must listen there,
    ``""`` for this process's own), ``attach`` (``path``: the rank's task file, ``records``: the
    rank's records directory; a new shell in ``rank``, on a pty or pipes, or with ``ssh`` an
    ``sshd -i``). ``node``: the machine the socket is on (None: unknown, reached here)."""

    job_id: str
    restart_count: int
    node: str | None
    kind: str
    path: str
    port: int | None = None
    user: str = ""
    records: str = ""
    rank: int = 0
    pty: bool = True
    ssh: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a job's socket is one of {', '.join(KINDS)}, not {self.kind!r}")


class SocketUnreachable(OSError):
    """The job's socket cannot be reached; one line why. ``retry``: it may be there soon (a
    wrapper not listening yet)."""

    def __init__(self, why: str, retry: bool = False) -> None:
        super().__init__(why)
        self.why, self.retry = why, retry

    def __str__(self) -> str:
        return self.why


# (socket, how long to keep trying) -> a connected socket on the socket's node, raises
# SocketUnreachable; blocking (the caller runs it off its event loop). A backend's door to
# sockets on other machines; None where every job runs here.
SocketOpener = Callable[[JobSocket, float], socket.socket]


async def connect(
    target: JobSocket, opener: SocketOpener | None, wait_s: float = CONNECT_WAIT_S
) -> socket.socket:
    """A connected, non-blocking socket to ``target``: here, or through ``opener`` on the
    machine it is on. A terminal that does not listen yet is tried again for ``wait_s``."""
    if opener is None or target.node is None:
        return await connect_here(target, wait_s)
    sock = await asyncio.to_thread(opener, target, wait_s)
    sock.setblocking(False)
    return sock


async def connect_here(target: JobSocket, wait_s: float = CONNECT_WAIT_S) -> socket.socket:
    """``target`` on this machine, with its checks; a connected, non-blocking socket."""
    if target.kind == "app":
        try:
            uid = pwd.getpwnam(target.user).pw_uid if target.user else os.getuid()
        except KeyError:
            raise SocketUnreachable(f"no account {target.user!r} on this machine") from None
        try:
            return await appsocket.connect(Path(target.path), target.port, uid)
        except appsocket.AppUnreachable as exc:
            raise SocketUnreachable(str(exc)) from None
    path = Path(target.path)
    if target.kind == "attach":
        path = await asyncio.to_thread(_start_attached, target)
    return await _connect_unix(path, wait_s)


def _start_attached(target: JobSocket) -> Path:
    """A new shell (or ``sshd -i``) in the rank's step, as its user: its socket."""
    run = None
    if target.ssh:
        sshd_bin = sshd.sshd_path()
        if sshd_bin is None:
            raise SocketUnreachable("this machine has no sshd "
                                    "(hint: apt-get install openssh-server)")  # fmt: skip
        run = _sshd_of(sshd_bin)
    try:
        return attach.start(
            Path(target.path), Path(target.records), ATTACH_LINGER_S, pty=target.pty,
            command=run, kind="ssh" if target.ssh else "attach", lossless=target.ssh,
        )  # fmt: skip
    except (ExecutorError, OSError) as exc:
        raise SocketUnreachable(str(exc)) from None


def _sshd_of(sshd_bin: str) -> Callable[[Task], list[str]]:
    return lambda task: sshd.command(
        sshd_bin, task.env, task.account.name if task.account else None
    )


async def _connect_unix(path: Path, wait_s: float) -> socket.socket:
    """A wrapper's socket: a job runs once launched, and its wrapper listens a moment later,
    so a missing or refusing socket is tried again for ``wait_s`` (without a thread)."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            name, fd = terminal.short_path(path)
        except OSError as exc:
            raise SocketUnreachable(exc.strerror or str(exc)) from None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, name)
            return sock
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            if time.monotonic() >= deadline:
                raise SocketUnreachable(exc.strerror or str(exc), retry=True) from None
        except OSError as exc:
            sock.close()
            raise SocketUnreachable(exc.strerror or str(exc)) from None
        finally:
            os.close(fd)
        await asyncio.sleep(0.01)
