"""A bare HTTP/1.1 keep-alive client for load: the request's bytes are built once, and each
call is a ``sendall`` and a read of one response (tens of microseconds of client CPU).

With httpx, 8 client threads in one process took 1.4-1.9 ms of CPU per request on a 2-core
machine: the load generator, not the server, then set the rate it measured (as wrk, not a
browser, is what a web server is measured with).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit


class RawClient:
    """One keep-alive connection to ``url`` sending ``POST path`` of one JSON body."""

    def __init__(self, url: str, token: str, path: str, body: Mapping[str, Any]) -> None:
        parts = urlsplit(url)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"{url}: a host and a port, please")
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        )
        self._request = head.encode() + data
        self._sock = socket.create_connection((parts.hostname, parts.port))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = b""

    def post(self) -> tuple[int, bytes]:
        """Send the request once; its status and body."""
        self._sock.sendall(self._request)
        while b"\r\n\r\n" not in self._buffer:
            self._buffer += self._recv()
        head, _, rest = self._buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            rest += self._recv()
        self._buffer = rest[length:]
        return int(head[9:12]), rest[:length]

    def _recv(self) -> bytes:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
