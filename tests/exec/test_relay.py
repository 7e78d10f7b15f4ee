"""The node agent's one-shot relay (`exec.terminals.relay`), on loopback without Ray: the secret
first,
then a byte stream both ways; a wrong secret, a short one, a late or second connection get no
byte and close the job's side; either side's end ends both. The same relay over a real Ray
node's agent is in ``tests/multinode/test_ray_interactive.py``."""

from __future__ import annotations

import socket
import time

import pytest

from railyard.exec.terminals.relay import SECRET_BYTES, Relays, dial


def pair() -> tuple[socket.socket, socket.socket]:
    """The job's side as the agent holds it, and the job's own end (its wrapper, its app)."""
    return socket.socketpair()


def closed_without_a_byte(sock: socket.socket, timeout_s: float = 5.0) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_the_secret_opens_a_stream_both_ways_and_either_end_closes_both() -> None:
    mine, job = pair()
    opened = Relays().open(mine, "127.0.0.1")
    assert len(opened.secret) == SECRET_BYTES
    assert opened.secret.hex() not in repr(opened)  # never printed with it
    stream = dial(opened)
    stream.sendall(b"keys")
    job.settimeout(5)
    assert job.recv(16) == b"keys"
    job.sendall(b"output")
    stream.settimeout(5)
    assert stream.recv(16) == b"output"
    job.close()  # the job's socket ends (the task exited): the relay ends
    assert closed_without_a_byte(stream)


def test_a_wrong_secret_gets_nothing_and_closes_the_listener_and_the_job_s_side() -> None:
    mine, job = pair()
    opened = Relays().open(mine, "127.0.0.1")
    job.sendall(b"buffered output the job wrote")  # waiting for the rightful client
    wrong = socket.create_connection((opened.host, opened.port), timeout=5)
    wrong.sendall(bytes(b ^ 1 for b in opened.secret))
    assert closed_without_a_byte(wrong)
    assert closed_without_a_byte(job)  # nothing came through to the job either
    with pytest.raises(ConnectionRefusedError):  # one-shot: the rightful secret is too late
        dial(opened, timeout_s=2)


def test_a_short_secret_then_silence_times_out_without_a_byte() -> None:
    mine, job = pair()
    opened = Relays(accept_s=0.5).open(mine, "127.0.0.1")
    job.sendall(b"output")
    slow = socket.create_connection((opened.host, opened.port), timeout=5)
    slow.sendall(opened.secret[:16])
    began = time.monotonic()
    assert closed_without_a_byte(slow)
    assert time.monotonic() - began < 3
    assert closed_without_a_byte(job)


def test_nobody_connecting_closes_the_job_s_side_and_the_port() -> None:
    mine, job = pair()
    opened = Relays(accept_s=0.3).open(mine, "127.0.0.1")
    assert closed_without_a_byte(job)
    with pytest.raises(ConnectionRefusedError):
        dial(opened, timeout_s=2)


def test_a_second_connection_is_not_served() -> None:
    mine, job = pair()
    opened = Relays().open(mine, "127.0.0.1")
    first = dial(opened)
    try:  # the listener closed at the first connection (or drops one still queued)
        second = dial(opened, timeout_s=2)
    except OSError:
        pass
    else:
        assert closed_without_a_byte(second)
    first.sendall(b"x")
    job.settimeout(5)
    assert job.recv(1) == b"x"
