"""HTTP/1.1 over one keep-alive socket: what the API client needs, standard library only.

A ``railyard`` call must answer in tens of milliseconds; ``http.client`` alone costs about
20 ms to import (its e-mail header parser, and ssl), a fifth of that. The API answers JSON
with a ``Content-Length`` (or chunked, which is read too), so a request and its response fit
in a few lines here. ``https`` wraps the socket with :mod:`ssl`, imported only then.
A WebSocket's handshake is one request too (:meth:`Connection.upgrade`), after which
:meth:`Connection.detach` hands the socket to ``websocket.py``.
"""

from __future__ import annotations

import select
import socket
from typing import NamedTuple

MAX_LINE_BYTES = 65536  # a status or header line longer than this is not our API


class Response(NamedTuple):
    status: int
    body: bytes


class Connection:
    """One connection to ``host:port``, opened on first use and reused while the server
    keeps it open. Socket errors raise :class:`OSError` (``ConnectionError`` for a response
    that is cut short or not HTTP)."""

    def __init__(self, scheme: str, host: str, port: int | None, timeout_s: float) -> None:
        self.scheme, self.host, self.timeout_s = scheme, host, timeout_s
        self.port = port or (443 if scheme == "https" else 80)
        name = f"[{host}]" if ":" in host else host
        default = self.port == (443 if scheme == "https" else 80)
        self.host_header = name if default else f"{name}:{self.port}"
        self._sock: socket.socket | None = None
        self._buffer = b""

    @property
    def open(self) -> bool:
        return self._sock is not None

    def dropped(self) -> bool:
        """True when the server closed this kept-alive socket while it sat idle (a restart, a
        server that stepped down or died): a request sent on it would fail after it went,
        so the caller opens a new one first, and any request may then be sent safely."""
        if self._sock is None or self._buffer:
            return False
        # a socket with a timeout waits that long for data before recv: ask select first
        poll = select.poll()  # not select.select: any descriptor number
        poll.register(self._sock, select.POLLIN)
        if not poll.poll(0):
            return False  # nothing to read: open and idle, as it should be
        try:
            return self._sock.recv(1, socket.MSG_PEEK) == b""
        except ValueError:  # TLS: no peeking under it; a dropped one fails as before
            return False
        except OSError:
            return True  # reset

    def connect(self) -> None:
        """Open the socket now, so a caller tells a server it never reached (nothing was
        sent: any request may go elsewhere) from one that failed after the request went."""
        if self._sock is None:
            self._connect()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._buffer = None, b""

    def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None = None
    ) -> Response:
        self._send(method, target, headers, body)
        status, fields, version = self._read_head()
        data = b"" if method == "HEAD" or status in (204, 304) else self._read_body(fields)
        if fields.get("connection", "").lower() == "close" or version == "HTTP/1.0":
            self.close()
        return Response(status, data)

    def upgrade(self, target: str, headers: dict[str, str]) -> tuple[Response, dict[str, str]]:
        """A GET that asks the server to switch protocols (a WebSocket's handshake), with the
        response's header fields. A 101 has no body and leaves the socket to the new protocol
        (take it with :meth:`detach`); any other answer is read whole, as :meth:`request` does."""
        self._send("GET", target, headers, None)
        status, fields, _ = self._read_head(switching=True)
        data = b"" if status in (101, 204, 304) else self._read_body(fields)
        return Response(status, data), fields

    def detach(self) -> tuple[socket.socket, bytes]:
        """The socket and the bytes already read past the last response (the new protocol's
        first, which must not be lost); the connection no longer owns either."""
        if self._sock is None:
            raise ConnectionError("not connected")
        sock, rest = self._sock, self._buffer
        self._sock, self._buffer = None, b""
        return sock, rest

    def _send(self, method: str, target: str, headers: dict[str, str], body: bytes | None) -> None:
        if self._sock is None:
            self._connect()
        assert self._sock is not None
        head = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}")
        self._sock.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + (body or b""))

    def _connect(self) -> None:
        sock = self._open()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.scheme == "https":
            import ssl  # only for https: it costs as much to import as the rest of a call

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        self._sock, self._buffer = sock, b""

    def _open(self) -> socket.socket:
        """``socket.create_connection``, but an ASCII host name goes to ``getaddrinfo`` as
        bytes: a ``str`` is IDNA-encoded first, and importing that codec (with
        ``unicodedata`` and ``stringprep``) costs a ``railyard`` call more than its request."""
        host = self.host.encode("ascii") if self.host.isascii() else self.host
        error: OSError | None = None
        for family, kind, proto, _, address in socket.getaddrinfo(
            host, self.port, type=socket.SOCK_STREAM
        ):
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(self.timeout_s)
                sock.connect(address)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            return sock
        raise error or OSError(f"{self.host}: no address")

    # -- reading ------------------------------------------------------------------------------

    def _fill(self) -> None:
        assert self._sock is not None
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self._buffer += chunk

    def _line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > MAX_LINE_BYTES:
                raise ConnectionError("response line too long: not railyard's API")
            self._fill()
        line, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
        return line

    def _exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._fill()
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _read_head(self, switching: bool = False) -> tuple[int, dict[str, str], str]:
        """The status, the header fields (lower-case names) and the HTTP version; a 101 is
        final only when ``switching`` (the request asked to upgrade)."""
        while True:
            version, _, rest = self._line().decode("latin-1").partition(" ")
            code = rest[:3]
            if not version.startswith("HTTP/") or not code.isdigit():
                raise ConnectionError(f"not an HTTP response: {version} {rest}"[:120])
            fields: dict[str, str] = {}
            while line := self._line():
                name, _, value = line.decode("latin-1").partition(":")
                fields[name.strip().lower()] = value.strip()
            if not 100 <= int(code) < 200 or (switching and code == "101"):  # other 1xx: interim
                return int(code), fields, version

    def _read_body(self, fields: dict[str, str]) -> bytes:
        if "chunked" in fields.get("transfer-encoding", "").lower():
            parts = []
            while size := int(self._line().split(b";")[0].strip() or b"0", 16):
                parts.append(self._exactly(size))
                self._line()  # the CRLF after each chunk
            while self._line():  # trailer fields, then the blank line
                pass
            return b"".join(parts)
        if "content-length" in fields:
            return self._exactly(int(fields["content-length"]))
        try:  # no length: the body runs to the end of the connection
            while True:
                self._fill()
        except ConnectionError:
            data = self._buffer
            self.close()
            return data
