"""The wrapper's two ends of an interactive task (``railyard run``): a pseudo-terminal or three
pipes, made before the fork; the child takes its side, the wrapper relays the other
(:mod:`railyard.exec.terminals.terminal`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import termios
from dataclasses import dataclass
from pathlib import Path

from railyard.client import frames
from railyard.exec.task.taskfile import Task
from railyard.exec.terminals import terminal


@dataclass
class Ends:
    """``child``: the descriptors the command gets as 0, 1, 2; ``parent``: the wrapper's
    (output fd to frame type, and where input goes); ``pty``: the child leads a new session
    on the terminal (so the wrapper forwards the signals it is sent)."""

    child: tuple[int, int, int]
    outputs: dict[int, bytes]
    stdin: int
    pty: bool
    server_fd: int

    def become_child(self) -> None:
        """In the forked child, after the switch to the user: take the terminal as 0, 1, 2."""
        os.close(self.server_fd)
        for fd in {*self.outputs, self.stdin}:
            os.close(fd)
        if self.pty:
            os.setsid()
            fcntl.ioctl(self.child[0], termios.TIOCSCTTY, 0)
        for target, fd in enumerate(self.child):
            os.dup2(fd, target)
        for fd in set(self.child):
            if fd > 2:
                os.close(fd)

    def close_child_side(self) -> None:
        for fd in set(self.child):
            os.close(fd)

    def forward(self, pid: int, sig: int) -> None:
        """A signal sent to the wrapper's group reaches a pty command's own session too."""
        if self.pty and pid > 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)


def open_ends(task: Task) -> tuple[Ends, socket.socket]:
    """Before the fork: the listening socket, and a pty (its slave owned by the job's user,
    as a login's terminal is) or three pipes."""
    assert task.terminal is not None
    server = terminal.listen(Path(task.terminal))
    if task.pty:
        master, slave = os.openpty()
        if task.account is not None and not task.account.is_self:
            os.fchown(slave, task.account.uid, -1)
        ends = Ends((slave, slave, slave), {master: frames.STDOUT}, master, True, server.fileno())
    else:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        outputs = {out_r: frames.STDOUT, err_r: frames.STDERR}
        ends = Ends((in_r, out_w, err_w), outputs, in_w, False, server.fileno())
    return ends, server


def relay(ends: Ends, server: socket.socket, pid: int, task: Task) -> int:
    """In the wrapper, after the fork: relay until the command ends; its return code."""
    ends.close_child_side()

    def signal_child(sig: int) -> None:
        """A pty command's whole session (its foreground job too), else the command itself."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if ends.pty:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)

    def child_done() -> int | None:
        done, status = os.waitpid(pid, os.WNOHANG)
        return os.waitstatus_to_exitcode(status) if done else None

    loop = terminal.Relay(server, ends.outputs, ends.stdin, signal_child,
                          pty_master=ends.stdin if ends.pty else None,
                          linger_s=task.linger_s, lossless=task.lossless)  # fmt: skip
    try:
        exited = os.pidfd_open(pid)
    except OSError:  # before Linux 5.3: the loop looks every tick
        exited = None
    try:
        return loop.run(child_done, exited)
    finally:
        if exited is not None:
            os.close(exited)
        server.close()
        assert task.terminal is not None
        with contextlib.suppress(OSError):
            os.unlink(task.terminal)
