"""An interactive task's terminal: the wrapper's side of ``railyard run`` (srun outside an
allocation, with or without ``--pty``).

The first process of an interactive job is not pointed at log files: its stdin, stdout and
stderr are a pseudo-terminal (``--pty``: a new session whose controlling terminal it is, so
Ctrl-C and Ctrl-Z reach its foreground job as the line discipline sends them) or three pipes.
The wrapper, which stays root-side, relays them to a Unix socket in the executor's records
directory (no user can reach it); the control plane connects there and bridges it to the
client's WebSocket (``/v1/jobs/{id}/terminal``), after checking the client is the job's owner.

One client at a time. Output made while no client is connected waits in a bounded buffer.
When no client has been connected for ``linger_s`` (none came, or the connection was lost),
the command is hung up (SIGHUP, then SIGKILL ``HANGUP_GRACE_S`` later): closing the client
ends the job, as closing ``srun`` does.

The frames, both ways on the socket and inside the WebSocket's binary messages, are
:mod:`railyard.client.frames`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import socket
import struct
import termios
import time
from collections.abc import Callable
from pathlib import Path

from railyard.client.frames import (
    CHUNK_BYTES,
    CLIENT_SIGNALS,
    EXIT,
    SIGNAL,
    STDERR,
    STDIN,
    STDIN_END,
    WINDOW,
    FrameReader,
    frame,
)

BUFFER_BYTES = 1 << 20  # output kept for a client not (yet) connected
INPUT_BYTES = 1 << 20  # input kept for a task not reading it (more is dropped)
DEFAULT_LINGER_S = 30.0
HANGUP_GRACE_S = 2.0
GOODBYE_S = 2.0  # how long the wrapper waits for the bridge to close after the end
TICK_S = 0.2


def socket_path(records_dir: Path, restart_count: int) -> Path:
    """Where the wrapper of rank 0 of attempt ``restart_count`` listens."""
    return records_dir / f"terminal-{restart_count}.sock"


def short_path(path: Path) -> tuple[str, int]:
    """A name under 108 bytes for a socket anywhere (``sun_path``'s limit), through an open
    descriptor of its directory; the caller closes the descriptor."""
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{path.name}", fd


def listen(path: Path) -> socket.socket:
    """The wrapper's listening socket (0600, the executor's account)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    name, fd = short_path(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            server.bind(name)
        finally:
            os.umask(old)
        server.listen(1)
    except BaseException:
        server.close()
        raise
    finally:
        os.close(fd)
    return server


def connect(path: Path, timeout_s: float = 5.0) -> socket.socket:
    """The control plane's side: a connection to the wrapper at ``path``."""
    name, fd = short_path(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(name)
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(fd)
    return sock


def set_window(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Relay:
    """The wrapper's loop between the command's terminal (or pipes) and one client.

    ``outputs``: descriptors to read, with the frame type each becomes; ``stdin``: where the
    client's input goes (the pty master, or a pipe); ``signal_child``: how a client's signal
    reaches the command (its process group). ``lossless``: input is never dropped; past
    ``INPUT_BYTES`` not yet taken, the client is not read (its bytes wait in the socket, and
    the bridge and the client slow down), for a stream such as SSH's that a lost byte breaks."""

    def __init__(
        self,
        server: socket.socket,
        outputs: dict[int, bytes],
        stdin: int,
        signal_child: Callable[[int], None],
        *,
        pty_master: int | None = None,
        linger_s: float = DEFAULT_LINGER_S,
        clock: Callable[[], float] = time.monotonic,
        lossless: bool = False,
    ) -> None:
        self.server, self.outputs, self.stdin = server, dict(outputs), stdin
        if stdin >= 0:  # a task that does not read must not stall the relay
            os.set_blocking(stdin, False)
        self.to_stdin = bytearray()  # input the task has not taken yet (bounded)
        self.stdin_ends = False
        self.signal_child, self.pty_master = signal_child, pty_master
        self.linger_s, self.clock, self.lossless = linger_s, clock, lossless
        self.client: socket.socket | None = None
        self.reader = FrameReader()
        self.pending = bytearray()  # output for a client to come
        self.alone_since = clock()
        self.hung_up_at: float | None = None

    def run(self, child_done: Callable[[], int | None], exited_fd: int | None = None) -> int:
        """Relay until the command ends; its ``Popen``-style return code. ``exited_fd`` (a
        pidfd of the command) wakes the loop the moment it ends; else it looks every tick."""
        while True:
            code = child_done()
            if code is not None:
                self._drain()
                self._send(frame(EXIT, str(code).encode()))
                if self.hung_up_at is None:  # hung up: its client is gone, nobody to wait for
                    self._deliver()
                self._say_goodbye()
                return code
            self._hang_up_if_alone()
            client = self.client.fileno() if self.client is not None else -1
            watched = [self.server.fileno(), *self.outputs]
            if client >= 0 and not (self.lossless and len(self.to_stdin) >= INPUT_BYTES):
                watched.append(client)
            if exited_fd is not None:
                watched.append(exited_fd)
            writable = [self.stdin] if self.to_stdin and self.stdin >= 0 else []
            try:
                ready, can_write, _ = select.select(watched, writable, [], TICK_S)
            except InterruptedError:
                continue
            if can_write:
                self._feed_stdin()
            for fd in ready:
                if fd == self.server.fileno():
                    self._accept()
                elif fd == client:
                    self._from_client()
                elif fd in self.outputs:
                    self._from_task(fd)

    def _deliver(self) -> None:
        """The command ended with no client connected (a short command ends before its
        client connects): wait up to the linger for one, which then gets all of it."""
        deadline = self.clock() + self.linger_s
        while self.client is None and self.clock() < deadline:
            if select.select([self.server], [], [], TICK_S)[0]:
                self._accept()

    def _accept(self) -> None:
        conn, _ = self.server.accept()
        if self.client is not None:  # one session at a time: the newcomer is told and closed
            with contextlib.suppress(OSError):
                conn.sendall(frame(STDERR, b"railyard: this job's terminal is in use\r\n"))
            conn.close()
            return
        self.client, self.reader = conn, FrameReader()
        self.hung_up_at = None
        if self.pending:
            self._send(bytes(self.pending))
            self.pending.clear()

    def _from_client(self) -> None:
        assert self.client is not None
        try:
            data = self.client.recv(CHUNK_BYTES)
            frames = self.reader.feed(data) if data else None
        except (OSError, ValueError):
            frames = None
        if frames is None:
            self._close_client()
            return
        for kind, payload in frames:
            self._act(kind, payload)

    def _act(self, kind: bytes, payload: bytes) -> None:
        if kind == STDIN and self.stdin >= 0:
            room = len(payload) if self.lossless else max(0, INPUT_BYTES - len(self.to_stdin))
            self.to_stdin += payload[:room]
            self._feed_stdin()
        elif kind == STDIN_END and self.pty_master is None and self.stdin >= 0:
            self.stdin_ends = True
            self._feed_stdin()
        elif kind == WINDOW and self.pty_master is not None and len(payload) == 4:
            rows, cols = struct.unpack(">HH", payload)
            with contextlib.suppress(OSError):
                set_window(self.pty_master, rows, cols)
        elif kind == SIGNAL and payload.decode(errors="replace") in CLIENT_SIGNALS:
            self.signal_child(signal.Signals[payload.decode()])

    def _feed_stdin(self) -> None:
        """Give the task what input it takes now; close its stdin once all is given after
        the client's end of input."""
        try:
            while self.to_stdin:
                del self.to_stdin[: os.write(self.stdin, self.to_stdin)]
        except BlockingIOError:
            return
        except OSError:  # the task closed its end: input has nowhere to go
            self.to_stdin.clear()
        if self.stdin_ends and not self.to_stdin:
            os.close(self.stdin)
            self.stdin = -1

    def _from_task(self, fd: int) -> None:
        try:
            data = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:  # the pty master is non-blocking (it is stdin too)
            return
        except OSError as exc:  # EIO: the pty's last holder closed it
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            del self.outputs[fd]
            return
        self._send(frame(self.outputs[fd], data))

    def _drain(self) -> None:
        """What the command wrote just before it ended (a pty's buffer outlives it)."""
        for fd in list(self.outputs):
            while fd in self.outputs and select.select([fd], [], [], 0)[0]:
                self._from_task(fd)

    def _send(self, data: bytes) -> None:
        if self.client is None:
            room = BUFFER_BYTES - len(self.pending)
            self.pending += data[: max(0, room)]
            return
        try:
            self.client.sendall(data)
        except OSError:
            self._close_client()
            self.pending += data[:BUFFER_BYTES]

    def _say_goodbye(self) -> None:
        """End the session in order: no more output, then wait (briefly) for the other side
        to close. Closing with its input unread would reset the connection, and the bridge
        would lose the output and the exit status still on its way."""
        if self.client is None:
            return
        with contextlib.suppress(OSError):
            self.client.shutdown(socket.SHUT_WR)
            self.client.settimeout(GOODBYE_S)
            while self.client.recv(CHUNK_BYTES):
                pass
        self._close_client()

    def _close_client(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
            self.alone_since = self.clock()

    def _hang_up_if_alone(self) -> None:
        if self.client is not None or self.clock() - self.alone_since < self.linger_s:
            return
        if self.hung_up_at is None:
            self.hung_up_at = self.clock()
            self.signal_child(signal.SIGHUP)
        elif self.clock() - self.hung_up_at > HANGUP_GRACE_S:
            self.signal_child(signal.SIGKILL)
