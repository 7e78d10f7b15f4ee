"""A client given several servers (``RAILYARD_URL=a,b``) finds the active one (issue 55, item
7): past a server that refuses connections, past a standby's 503 to the active it names; a
submit cut short after it was sent is never sent again elsewhere. Real sockets, stdlib HTTP
servers on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from railyard.client.client import Client, ClientError


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn

    def log_message(self, *_: object) -> None:
        pass

    def _answer(self) -> None:
        server = self.server
        assert isinstance(server, _Server)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        server.seen.append(f"{self.command} {self.path}")
        if server.mode == "cut":  # read the request, then go away without an answer
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        status, body = server.answer()
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 503:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(data)
        if server.mode == "closes":  # then goes away while the client keeps the socket
            self.close_connection = True

    do_GET = do_POST = _answer


class _Server(ThreadingHTTPServer):
    def __init__(self, mode: str, active: str = "") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode, self.active = mode, active
        self.seen: list[str] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def answer(self) -> tuple[int, dict[str, object]]:
        if self.mode == "standby":
            return 503, {"detail": "standby", "standby": True, "active": self.active}
        return 200, {"status": "ok", "from": self.url}


@pytest.fixture
def servers() -> Iterator[list[_Server]]:
    started: list[_Server] = []
    yield started
    for server in started:
        server.shutdown()
        server.server_close()


def _start(servers: list[_Server], mode: str, active: str = "") -> _Server:
    server = _Server(mode, active)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    servers.append(server)
    return server


def _closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # nobody listens there after this


def test_the_client_passes_a_dead_server_and_a_standby_to_the_active(
    servers: list[_Server],
) -> None:
    active = _start(servers, "active")
    standby = _start(servers, "standby", active=active.url)
    client = Client(f"{_closed_url()},{standby.url}", "token")
    assert client.health()["from"] == active.url  # type: ignore[typeddict-item]
    assert client.url == active.url
    assert standby.seen == ["GET /healthz"]
    client.submit({"command": ["true"]})  # stays with the active
    assert active.seen == ["GET /healthz", "POST /v1/jobs"]
    assert standby.seen == ["GET /healthz"]
    client.close()


def test_one_server_answers_its_503_at_once(servers: list[_Server]) -> None:
    standby = _start(servers, "standby", active="")
    with pytest.raises(ClientError) as caught:
        Client(standby.url, "token").health()
    assert caught.value.status == 503
    assert standby.seen == ["GET /healthz"]


def test_a_submit_cut_short_is_not_sent_to_another_server(servers: list[_Server]) -> None:
    cut, active = _start(servers, "cut"), _start(servers, "active")
    client = Client(f"{cut.url},{active.url}", "token")
    with pytest.raises(ClientError, match="cannot reach railyard"):
        client.submit({"command": ["true"]})
    assert cut.seen == ["POST /v1/jobs"]
    assert active.seen == []  # maybe stored by the first: never sent twice
    assert client.health()["from"] == active.url  # type: ignore[typeddict-item]
    client.close()


def test_a_kept_alive_socket_the_server_closed_is_not_used_for_a_submit(
    servers: list[_Server],
) -> None:
    """A server that restarted (a standby taking over, a server stepping down) closed the
    idle socket: the next submit goes on a new one instead of failing after it was sent."""
    server = _start(servers, "closes")
    with Client(server.url, "token") as client:
        for _ in range(3):
            client.submit({"command": ["true"]})
            time.sleep(0.2)  # the server's close reaches the client
    assert server.seen == ["POST /v1/jobs"] * 3
