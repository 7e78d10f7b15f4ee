"""A WebSocket client (RFC 6455), standard library only: the terminal stream of interactive
work (``railyard run --pty``, ``alloc``, ``attach``) between the user's terminal and a task.

The handshake is an HTTP/1.1 request on :class:`~railyard.client.transport.Connection` (the
same host header, address lookup and ``ssl`` only for ``wss``), which then hands over its
socket and the bytes it read past the 101. One thread may :meth:`WebSocket.recv` while others
send: sends hold a lock, so frames never interleave on the wire, and ``recv`` waits in
``select`` rather than changing the socket's timeout under a sender.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import select
import socket
import threading
import time
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

from railyard.client.transport import Connection

MAX_MESSAGE_BYTES = 16 * 2**20  # a terminal's output comes in small pieces: far more is a fault
CLOSE_WAIT_S = 2.0  # how long close() waits for the server to answer its close frame
ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
KINDS = {TEXT: "text", BINARY: "binary"}
NO_STATUS = 1005  # the close code of a close frame that carries none (RFC 6455 7.1.5)


class WebSocketRefused(Exception):
    """The server answered the upgrade with an HTTP status (the API's JSON error body)."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body[:200]!r}")
        self.status, self.body = status, body


class ProtocolError(ConnectionError):
    """The server broke RFC 6455 (or sent more than :data:`MAX_MESSAGE_BYTES`)."""


class Endpoint(NamedTuple):
    scheme: str  # http or https: what carries the handshake
    host: str
    port: int | None
    target: str  # path and query


def parse_url(url: str) -> Endpoint:
    """``ws``/``wss``, or ``http``/``https`` since the CLI holds the API's base URL."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "http": "http", "wss": "https", "https": "https"}.get(parts.scheme)
    if scheme is None or not parts.hostname:
        raise ValueError(f"bad WebSocket URL {url!r} (hint: ws://host:port/path)")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad WebSocket URL {url!r}: the port is not a number") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Endpoint(scheme, parts.hostname, port, target)


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` that proves the server read our ``Sec-WebSocket-Key``."""
    return base64.b64encode(hashlib.sha1(key.encode() + ACCEPT_GUID).digest()).decode()


def frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked frame (a client must mask every frame)."""
    size = len(payload)
    if size < 126:
        head = bytes((0x80 | opcode, 0x80 | size))
    elif size < 2**16:
        head = bytes((0x80 | opcode, 0x80 | 126)) + size.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 0x80 | 127)) + size.to_bytes(8, "big")
    key = os.urandom(4)
    return head + key + _mask(key, payload)


def _mask(key: bytes, data: bytes) -> bytes:
    """XOR with the repeated key, as one big integer: a MiB in milliseconds, not seconds."""
    size = len(data)
    keys = (key * (size // 4 + 1))[:size]
    return (int.from_bytes(data, "little") ^ int.from_bytes(keys, "little")).to_bytes(
        size, "little"
    )


class WebSocket:
    """A client connection, after its handshake. A server that breaks the protocol raises
    :class:`ProtocolError` (after a close frame that tells it why); a lost connection
    :class:`ConnectionError`."""

    def __init__(self, sock: socket.socket, buffer: bytes = b"") -> None:
        self._sock = sock
        self._buffer = bytearray(buffer)  # bytes read and not yet parsed
        self._send_lock, self._recv_lock = threading.Lock(), threading.Lock()
        self._parts: list[bytes] = []  # a fragmented message so far (kept across timeouts)
        self._kind = ""
        self._close_sent = False
        self._close_code: int | None = None

    @classmethod
    def connect(
        cls, url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 10.0
    ) -> WebSocket:
        """Open and upgrade; ``timeout_s`` bounds the handshake and each send after it."""
        endpoint = parse_url(url)
        key = base64.b64encode(os.urandom(16)).decode()
        fields = {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": key,
            "Sec-WebSocket-Version": "13",
            **(headers or {}),
        }
        conn = Connection(endpoint.scheme, endpoint.host, endpoint.port, timeout_s)
        try:
            response, reply = conn.upgrade(endpoint.target, fields)
            if response.status != 101:
                raise WebSocketRefused(response.status, response.body)
            if reply.get("upgrade", "").lower() != "websocket":
                raise ConnectionError("101 without Upgrade: websocket")
            if reply.get("sec-websocket-accept") != accept_key(key):
                raise ConnectionError("bad Sec-WebSocket-Accept: the server did not read our key")
            if reply.get("sec-websocket-extensions"):
                raise ConnectionError("the server chose an extension this client did not offer")
            sock, rest = conn.detach()
        finally:
            conn.close()  # after detach() this closes nothing
        return cls(sock, rest)

    @property
    def close_code(self) -> int | None:
        """The peer's close code once it closed (1005 when its close frame carried none)."""
        return self._close_code

    def fileno(self) -> int:
        return self._sock.fileno()

    # -- sending ----------------------------------------------------------------------------

    def send_binary(self, data: bytes) -> None:
        self._send(BINARY, data)

    def send_text(self, text: str) -> None:
        self._send(TEXT, text.encode())

    def _send(self, opcode: int, payload: bytes) -> None:
        data = frame(opcode, payload)  # masked outside the lock: other senders need not wait
        with self._send_lock:
            if self._close_sent:
                raise ConnectionError("the WebSocket is closed")
            self._sock.sendall(data)

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Send a close frame (once), wait briefly for the server's answer unless another
        thread is receiving (that thread gets it and returns None), and close the socket."""
        with self._send_lock:
            if self._close_sent:
                return
            self._close_sent = True
            try:
                why = reason.encode()[:123].decode(errors="ignore").encode()  # whole characters
                self._sock.sendall(frame(CLOSE, code.to_bytes(2, "big") + why))
            except OSError:
                pass  # the server went first; there is nothing left to tell it
        if self._close_code is None and self._recv_lock.acquire(blocking=False):
            try:
                self._await_close(time.monotonic() + CLOSE_WAIT_S)
            finally:
                self._recv_lock.release()
        self._shutdown()

    def _await_close(self, deadline: float) -> None:
        try:
            while self._close_code is None:
                self._handle(*self._frame(deadline))
        except OSError:  # a timeout, the connection gone, or a protocol error: done waiting
            pass

    def _shutdown(self) -> None:
        """Shut down before closing: a thread waiting in ``select`` on the socket wakes up."""
        with contextlib.suppress(OSError):  # already shut, or never connected
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    # -- receiving --------------------------------------------------------------------------

    def recv(self, timeout_s: float | None = None) -> tuple[str, bytes] | None:
        """The next message, ``("text" | "binary", payload)``; None once the peer closed (its
        close answered) or after :meth:`close`. Pings are answered here. TimeoutError when
        ``timeout_s`` passes first; a message begun and not finished is kept for the next call."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._recv_lock:
            try:
                while self._close_code is None:
                    message = self._handle(*self._frame(deadline))
                    if message is not None:
                        return message
            except (TimeoutError, ProtocolError):
                raise
            except OSError:  # the socket closed under us: by close() in another thread?
                if not self._close_sent:
                    raise
        return None

    def _handle(self, final: bool, opcode: int, payload: bytes) -> tuple[str, bytes] | None:
        """Act on one frame; a whole message once its last fragment is in."""
        if opcode == PING:
            if not self._close_sent:
                self._send(PONG, payload)
        elif opcode == CLOSE:
            self._close_code = int.from_bytes(payload[:2], "big") if payload else NO_STATUS
            if self._close_sent:  # the answer to ours
                self._shutdown()
            else:  # answer with the same code, as RFC 6455 5.5.1 asks
                self.close(self._close_code if payload else 1000)
        elif opcode in KINDS or opcode == CONTINUATION:
            if (opcode == CONTINUATION) != bool(self._kind):
                raise self._fail(1002, "a fragment out of order")
            self._kind = self._kind or KINDS[opcode]
            self._parts.append(payload)
            if final:
                kind, data = self._kind, b"".join(self._parts)
                self._kind, self._parts = "", []
                if kind == "text":
                    try:
                        data.decode()
                    except UnicodeDecodeError:
                        raise self._fail(1007, "a text message that is not UTF-8") from None
                return kind, data
        elif opcode != PONG:
            raise self._fail(1002, f"unknown opcode {opcode:#x}")
        return None

    def _frame(self, deadline: float | None) -> tuple[bool, int, bytes]:
        """The next frame: (final, opcode, payload). Consumes nothing until it is all in."""
        self._need(2, deadline)
        first, second = self._buffer[0], self._buffer[1]
        final, opcode, size, start = bool(first & 0x80), first & 0x0F, second & 0x7F, 2
        if first & 0x70:
            raise self._fail(1002, "reserved bits set, and no extension was agreed")
        if second & 0x80:
            raise self._fail(1002, "a masked frame from the server")
        if opcode >= CLOSE and (not final or size > 125):
            raise self._fail(1002, "a control frame fragmented or over 125 bytes")
        if size >= 126:
            start = 4 if size == 126 else 10
            self._need(start, deadline)
            size = int.from_bytes(self._buffer[2:start], "big")
        if size + sum(map(len, self._parts)) > MAX_MESSAGE_BYTES:
            raise self._fail(1009, f"a message over {MAX_MESSAGE_BYTES} bytes")
        self._need(start + size, deadline)
        payload = bytes(self._buffer[start : start + size])
        del self._buffer[: start + size]
        return final, opcode, payload

    def _need(self, size: int, deadline: float | None) -> None:
        while len(self._buffer) < size:
            if not self._readable(deadline):
                raise TimeoutError("no message from the server in time")
            chunk = self._sock.recv(max(65536, size - len(self._buffer)))
            if not chunk:
                raise ConnectionError("the server closed the connection without a close frame")
            self._buffer += chunk

    def _readable(self, deadline: float | None) -> bool:
        if getattr(self._sock, "pending", lambda: 0)():  # TLS: decrypted bytes already held
            return True
        wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return bool(select.select([self._sock], [], [], wait_s)[0])
        except ValueError:  # closed by close() in another thread: its descriptor is -1
            raise ConnectionError("the WebSocket is closed") from None

    def _fail(self, code: int, message: str) -> ProtocolError:
        """Close with ``code`` (the server learns why) and return the error to raise."""
        self.close(code, message)
        return ProtocolError(message)
