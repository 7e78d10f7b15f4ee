"""A one-shot relay that brings a job's socket on a node to the control plane, for the node's
agent (:mod:`railyard.exec.ray.rayagent`).

The agent has already connected to the socket on its own machine, with the checks made there
(:func:`railyard.exec.terminals.jobsocket.connect_here`). It then listens on a fresh TCP port of its
node's address and hands back ``(host, port, secret)`` through Ray, which carries it to the
control plane alone. The control plane connects and sends the secret (32 random bytes) first;
from then on the connection is a plain byte stream to the job's socket, both ways, until
either side closes. Nothing is sent to a connection before it has given the whole secret: a
wrong one, none within ``ACCEPT_S``, or a second connection gets no byte, and the listener is
closed after its first connection whatever it said, so a port is never a standing door.

A relay lives in its agent's process: the agent is killed when the job's end is reported, so
every relay ends with its job (the job's own socket, its wrapper's, closes first anyway).

The stream is not encrypted, as none of Ray's own traffic is without Ray's TLS: the secret
keeps others out, not eavesdroppers on the cluster's network.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field

SECRET_BYTES = 32
ACCEPT_S = 5.0  # from the port handed out to the secret read; else it closes
CHUNK_BYTES = 65536


@dataclass(frozen=True)
class Opened:
    """Where the control plane connects, and what it must say first (never printed)."""

    host: str
    port: int
    secret: bytes = field(repr=False)


class Relays:
    """One agent's relays (many at once: a terminal, shells, an app's requests)."""

    def __init__(self, accept_s: float = ACCEPT_S) -> None:
        self.accept_s = accept_s
        self.opened = 0  # how many were handed out (tests ask)
        self._lock = threading.Lock()

    def open(self, target: socket.socket, host: str) -> Opened:
        """Listen on a fresh port of ``host`` for the control plane; one thread serves the
        first connection and relays ``target`` to it. ``target`` is the relay's now."""
        target.setblocking(True)
        try:
            listener = socket.create_server((host, 0), backlog=1)
        except OSError:
            target.close()
            raise
        secret = secrets.token_bytes(SECRET_BYTES)
        port = listener.getsockname()[1]
        threading.Thread(
            target=self._serve, args=(listener, secret, target), daemon=True,
            name=f"railyard-relay-{port}",
        ).start()  # fmt: skip
        with self._lock:
            self.opened += 1
        return Opened(host, port, secret)

    def _serve(self, listener: socket.socket, secret: bytes, target: socket.socket) -> None:
        deadline = time.monotonic() + self.accept_s
        conn = None
        try:
            listener.settimeout(self.accept_s)
            conn, _ = listener.accept()
        except OSError:  # nobody came in time
            pass
        finally:
            listener.close()  # one connection, whatever it says
        if conn is None:
            target.close()
            return
        try:
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            said = _recv_exactly(conn, SECRET_BYTES)
            if not hmac.compare_digest(said, secret):
                raise ConnectionRefusedError("wrong secret")
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # keystrokes, at once
        except OSError:
            conn.close()
            target.close()
            return
        splice(conn, target)


def _recv_exactly(conn: socket.socket, size: int) -> bytes:
    got = bytearray()
    while len(got) < size:
        data = conn.recv(size - len(got))
        if not data:
            break
        got += data
    return bytes(got)


def splice(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until either side closes or fails, then close both. One thread per
    direction, so neither waits on the other's writes (a full buffer one way never stalls
    the other)."""

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(CHUNK_BYTES):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):  # wakes the other direction
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    back = threading.Thread(target=pump, args=(b, a), daemon=True)
    back.start()
    pump(a, b)
    back.join()
    a.close()
    b.close()


def dial(opened: Opened, timeout_s: float = ACCEPT_S) -> socket.socket:
    """The control plane's side: connect, say the secret; a byte stream to the job's socket."""
    sock = socket.create_connection((opened.host, opened.port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(opened.secret)
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return sock
