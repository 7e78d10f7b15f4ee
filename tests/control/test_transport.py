"""The client's HTTP/1.1 against a real server (the standard library's), for the framings
uvicorn does not use for JSON but HTTP allows: chunked bodies, bodies that run to the end of
the connection, interim 1xx answers; and keep-alive reuse."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from railyard.client.transport import Connection


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    peers: ClassVar[set[int]] = set()  # client ports seen: one per connection

    def log_message(self, *_: object) -> None:
        pass

    def do_GET(self) -> None:
        Handler.peers.add(self.client_address[1])
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b'{"a": ', b"[1, 2]}"):
                self.wfile.write(f"{len(part):x};ext=1\r\n".encode() + part + b"\r\n")
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        elif self.path == "/eof":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b'{"to": "the end"}')
            self.close_connection = True
        elif self.path == "/continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self._send(b'{"after": "interim"}')
        else:
            self._send(b'{"path": "%s"}' % self.path.encode())

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._send(body, status=201)

    def _send(self, body: bytes, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Handler.peers = set()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_keep_alive_and_framings(server: int) -> None:
    conn = Connection("http", "127.0.0.1", server, timeout_s=10)
    try:
        assert conn.request("GET", "/one", {}).body == b'{"path": "/one"}'
        assert conn.request("GET", "/chunked", {}).body == b'{"a": [1, 2]}'
        assert conn.request("POST", "/echo", {}, b'{"x": 1}') == (201, b'{"x": 1}')
        assert conn.request("GET", "/continue", {}).body == b'{"after": "interim"}'
        assert len(Handler.peers) == 1  # one connection for all of them
        assert conn.request("GET", "/eof", {}).body == b'{"to": "the end"}'
        assert not conn.open  # the server said close
        assert conn.request("GET", "/two", {}).body == b'{"path": "/two"}'  # reconnects
        assert len(Handler.peers) == 2
    finally:
        conn.close()


def test_nothing_listening_is_an_os_error() -> None:
    conn = Connection("http", "127.0.0.1", 9, timeout_s=5)
    with pytest.raises(OSError, match="refused"):
        conn.request("GET", "/", {})
