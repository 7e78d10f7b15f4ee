"""The wrapper's side of an interactive task, without the control plane: the real wrapper runs
a command on a pty or pipes and relays it to a socket this test connects to, as the API does."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from railyard.client import frames
from railyard.exec.task.launch import wrapped_command
from railyard.exec.task.taskfile import Task
from railyard.exec.terminals import terminal

ENV = {"PATH": "/usr/bin:/bin", "TERM": "xterm", "HOME": "/tmp"}


def start(
    tmp_path: Path, command: list[str], pty: bool, linger_s: float = 5.0, lossless: bool = False
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    sock = terminal.socket_path(tmp_path, 0)
    task = Task(env=ENV, cwd="/tmp", terminal=str(sock), pty=pty, linger_s=linger_s,
                lossless=lossless)  # fmt: skip
    task.write(tmp_path / "task.json")
    proc = subprocess.Popen(
        wrapped_command(command, tmp_path / "rank-0.restart-0.exit", tmp_path / "task.json"),
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            return proc, terminal.connect(sock)
        except (FileNotFoundError, ConnectionRefusedError):
            assert time.monotonic() < deadline, "the wrapper never listened"
            time.sleep(0.02)


def collect(conn: socket.socket) -> tuple[bytes, bytes, int]:
    """stdout, stderr and the exit code, until the exit frame."""
    reader, out, err = frames.FrameReader(), b"", b""
    conn.settimeout(30)
    while data := conn.recv(65536):
        for kind, payload in reader.feed(data):
            if kind == frames.STDOUT:
                out += payload
            elif kind == frames.STDERR:
                err += payload
            elif kind == frames.EXIT:
                return out, err, int(payload)
    raise AssertionError(f"no exit frame; got {out!r} {err!r}")


def test_pipes_carry_stdin_stdout_stderr_and_the_status(tmp_path: Path) -> None:
    script = "read x; echo got $x; echo err >&2; exit 3"
    proc, conn = start(tmp_path, ["sh", "-c", script], pty=False)
    conn.sendall(frames.frame(frames.STDIN, b"hello\n") + frames.frame(frames.STDIN_END))
    assert collect(conn) == (b"got hello\n", b"err\n", 3)
    assert proc.wait(30) == 3


def test_a_pty_has_the_window_size_and_is_the_controlling_terminal(tmp_path: Path) -> None:
    proc, conn = start(tmp_path, ["sh", "-c", "read x; stty size; tty; exit 4"], pty=True)
    conn.sendall(frames.frame(frames.WINDOW, struct.pack(">HH", 33, 77)))
    conn.sendall(frames.frame(frames.STDIN, b"go\r"))
    out, _, code = collect(conn)
    assert code == 4
    assert b"33 77" in out
    assert b"/dev/pts/" in out
    proc.wait(30)


def test_a_task_that_reads_nothing_does_not_stall_the_relay(tmp_path: Path) -> None:
    """2 MiB of input to a task that never reads: the relay keeps what fits (bounded) and
    still delivers the task's output and end."""
    proc, conn = start(tmp_path, ["sh", "-c", "sleep 1; echo done"], pty=False)
    chunk = frames.frame(frames.STDIN, b"x" * (frames.MAX_FRAME_BYTES - 16))
    conn.sendall(chunk + chunk)
    assert collect(conn) == (b"done\n", b"", 0)
    proc.wait(30)


def test_a_lossless_stream_waits_for_a_slow_task_and_drops_nothing(tmp_path: Path) -> None:
    """An SSH stream (``lossless``): 4 MiB to a task that starts reading late all arrive,
    the client being read only as fast as the task takes it."""
    proc, conn = start(tmp_path, ["sh", "-c", "sleep 1; wc -c"], pty=False, lossless=True)
    chunk = frames.frame(frames.STDIN, b"x" * (frames.MAX_FRAME_BYTES - 16))
    conn.sendall(chunk * 4 + frames.frame(frames.STDIN_END))
    assert collect(conn) == (f"{4 * (frames.MAX_FRAME_BYTES - 16)}\n".encode(), b"", 0)
    proc.wait(30)


def test_output_before_the_client_and_a_lost_client_ends_the_task(tmp_path: Path) -> None:
    proc, conn = start(tmp_path, ["sh", "-c", "echo early; exec sleep 300"], pty=False, linger_s=1)
    reader = frames.FrameReader()
    conn.settimeout(30)
    got = b""
    while b"early" not in got:
        got += b"".join(p for k, p in reader.feed(conn.recv(65536)) if k == frames.STDOUT)
    conn.close()  # lost: after the linger the task is hung up
    began = time.monotonic()
    assert proc.wait(30) == -signal.SIGHUP  # the wrapper ends as its command did
    assert time.monotonic() - began >= 0.5
    with pytest.raises(FileNotFoundError):
        os.stat(terminal.socket_path(tmp_path, 0))  # the socket went with it


def test_attach_refuses_a_step_whose_processes_are_not_tracked(tmp_path: Path) -> None:
    """Where no cgroup holds the step (the subreaper fallback), a shell started beside it
    would outlive a cancel: attach says so instead of starting one."""
    from railyard.exec.protocol import ExecutorError
    from railyard.exec.task.taskfile import rank_task_path
    from railyard.exec.terminals import attach

    rank_task = rank_task_path(tmp_path, 0, 0)
    Task(env=ENV, cwd="/tmp", subreaper=True).write(rank_task)
    with pytest.raises(ExecutorError, match="cannot track"):
        attach.start(rank_task, tmp_path, linger_s=1)
    assert not list(tmp_path.glob("attach-*"))  # nothing was started or written
    with pytest.raises(ExecutorError, match="does not run on this machine"):
        attach.start(rank_task_path(tmp_path, 1, 0), tmp_path, linger_s=1)


def test_input_left_unread_at_the_end_does_not_lose_the_output(tmp_path: Path) -> None:
    """A client's end of input that reaches the wrapper after its command ended must not make
    the wrapper's close reset the connection: the output and the status still arrive (the
    CLI sends that frame at once when its stdin is empty)."""
    for attempt in range(5):
        records = tmp_path / str(attempt)  # each its own attempt: a rank starts once
        records.mkdir()
        proc, conn = start(records, ["sh", "-c", "echo out; exit 3"], pty=False)
        time.sleep(0.3)  # the command has ended; the wrapper holds its output for us
        conn.sendall(frames.frame(frames.STDIN_END))
        assert collect(conn) == (b"out\n", b"", 3)
        conn.close()
        assert proc.wait(30) == 3
