"""The WebSocket client against a real uvicorn server (FastAPI endpoints on a loopback port,
served by the ``websockets`` package as ``railyard up`` will be), and against a raw socket
stand-in for what uvicorn will not send on cue: a wrong accept key, a ping coalesced with the
101, fragments, frames that break the protocol."""

from __future__ import annotations

import base64
import hashlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import uvicorn
from fastapi import FastAPI, WebSocketDisconnect
from fastapi import WebSocket as ServerSocket
from fastapi.responses import JSONResponse

from railyard.client.websocket import (
    MAX_MESSAGE_BYTES,
    Endpoint,
    ProtocolError,
    WebSocket,
    WebSocketRefused,
    parse_url,
)

TOKEN = "Bearer s3cret"
SIZES = [0, 125, 126, 65535, 65536, 2**20]  # each length form, and both edges of the 16-bit one


def make_app() -> FastAPI:
    app = FastAPI()

    @app.websocket("/echo")
    async def echo(ws: ServerSocket) -> None:
        await ws.accept()
        try:
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("bytes") is not None:
                    await ws.send_bytes(message["bytes"])
                else:
                    await ws.send_text(message["text"])
        except WebSocketDisconnect:
            return

    @app.websocket("/attach")
    async def attach(ws: ServerSocket) -> None:
        """Refuses before accept as the API will: a JSON error body, or a bare close (403)."""
        if ws.query_params.get("job") == "missing":
            await ws.send_denial_response(JSONResponse({"detail": "no job 7"}, status_code=404))
            return
        if ws.headers.get("authorization") != TOKEN:
            await ws.close(code=1008)
            return
        await ws.accept()
        await ws.send_text("attached")
        await ws.close(code=4001, reason="the task ended")

    return app


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """uvicorn in a thread on a socket bound here (port 0: no race for a free port)."""
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(make_app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "uvicorn exited"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture
def echo(base_url: str) -> Iterator[WebSocket]:
    ws = WebSocket.connect(base_url.replace("http://", "ws://") + "/echo")
    yield ws
    ws.close()


def pattern(size: int) -> bytes:
    return (bytes(range(256)) * (size // 256 + 1))[:size]


# -- against uvicorn ------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_binary_and_text_round_trips(echo: WebSocket, size: int) -> None:
    echo.send_binary(pattern(size))
    assert echo.recv(timeout_s=10) == ("binary", pattern(size))
    text = "é" * (size // 2) + "x" * (size % 2)  # two bytes a character: size bytes of UTF-8
    echo.send_text(text)
    assert echo.recv(timeout_s=10) == ("text", text.encode())


def test_the_http_base_url_is_accepted_and_our_close_is_answered(base_url: str) -> None:
    ws = WebSocket.connect(base_url + "/echo", timeout_s=5)
    ws.send_text("hi")
    assert ws.recv(timeout_s=10) == ("text", b"hi")
    ws.close(1000)
    assert ws.close_code == 1000  # the server's answer to our close, read by close()
    ws.close()  # idempotent
    assert ws.recv(timeout_s=1) is None
    with pytest.raises(ConnectionError):
        ws.send_text("after close")


def test_a_server_side_close_gives_its_code(base_url: str) -> None:
    ws = WebSocket.connect(base_url + "/attach?job=7", headers={"Authorization": TOKEN})
    assert ws.recv(timeout_s=10) == ("text", b"attached")
    assert ws.recv(timeout_s=10) is None
    assert ws.close_code == 4001
    assert ws.recv(timeout_s=10) is None  # still closed
    with pytest.raises(ConnectionError):
        ws.send_binary(b"x")
    ws.close()


def test_a_refused_handshake_gives_the_status_and_the_api_error_body(base_url: str) -> None:
    with pytest.raises(WebSocketRefused) as refused:
        WebSocket.connect(base_url + "/attach?job=missing", headers={"Authorization": TOKEN})
    assert (refused.value.status, refused.value.body) == (404, b'{"detail":"no job 7"}')
    with pytest.raises(WebSocketRefused) as bare:
        WebSocket.connect(base_url + "/attach?job=7", headers={"Authorization": "Bearer no"})
    assert bare.value.status == 403  # closed before accept: uvicorn answers 403


def test_recv_times_out_and_the_connection_stays_usable(echo: WebSocket) -> None:
    with pytest.raises(TimeoutError):
        echo.recv(timeout_s=0.05)
    echo.send_binary(b"still here")
    assert echo.recv(timeout_s=10) == ("binary", b"still here")


def test_senders_in_two_threads_while_a_third_receives(echo: WebSocket) -> None:
    """Frames from two threads at once, each in many writes (a small send buffer, set on a
    copy of the descriptor): without the send lock their bytes interleave and the server
    drops the connection."""
    with socket.fromfd(echo.fileno(), socket.AF_INET, socket.SOCK_STREAM) as same:
        same.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    count = 20
    sent = {tag: [tag + pattern(100_000 + 997 * i) for i in range(count)] for tag in (b"A", b"B")}
    received: list[bytes] = []

    def receive() -> None:
        while len(received) < 2 * count and (message := echo.recv(timeout_s=30)) is not None:
            received.append(message[1])

    threads = [threading.Thread(target=receive)]
    threads += [
        threading.Thread(target=lambda msgs=msgs: [echo.send_binary(m) for m in msgs])
        for msgs in sent.values()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for tag, messages in sent.items():  # all back, each sender's in its order
        assert [m for m in received if m[:1] == tag] == messages


# -- against a raw socket stand-in ----------------------------------------------------------

FIN, TEXT, BINARY, CONT, CLOSE, PING, PONG = 0x80, 0x1, 0x2, 0x0, 0x8, 0x9, 0xA


def server_frame(opcode: int, payload: bytes = b"", *, final: bool = True) -> bytes:
    """An unmasked frame, as a server sends it (7-bit lengths: these tests need no more)."""
    assert len(payload) < 126
    return bytes(((FIN if final else 0) | opcode, len(payload))) + payload


def read_client_frame(conn: socket.socket) -> tuple[int, bytes]:
    def exactly(size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            assert chunk, "the client hung up"
            data += chunk
        return data

    first, second = exactly(2)
    assert second & 0x80, "a client frame must be masked"
    size = second & 0x7F
    size = int.from_bytes(exactly({126: 2, 127: 8}[size]), "big") if size >= 126 else size
    key, data = exactly(4), exactly(size)
    return first & 0x0F, bytes(b ^ key[i % 4] for i, b in enumerate(data))


def switching(key: str, accept: str | None = None) -> bytes:
    digest = hashlib.sha1(key.encode() + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
    accept = accept or base64.b64encode(digest).decode()
    return (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
    ).encode()


@contextmanager
def stand_in(script: Callable[[socket.socket, str], None]) -> Iterator[str]:
    """A server on a raw socket: reads one handshake and runs ``script(conn, key)``; its
    failures are raised here when the block ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(4096)
                found = re.search(rb"Sec-WebSocket-Key: (\S+)", head)
                assert found, head
                script(conn, found.group(1).decode())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{listener.getsockname()[1]}/raw"
    finally:
        thread.join(15)
        listener.close()
    assert not errors, errors


def test_pings_are_answered_and_fragments_joined_even_right_after_the_101() -> None:
    """The ping comes in the same write as the 101: lost if the client drops bytes it read
    past the handshake response."""
    seen: list[tuple[int, bytes]] = []

    def script(conn: socket.socket, key: str) -> None:
        conn.sendall(switching(key) + server_frame(PING, b"one"))
        seen.append(read_client_frame(conn))
        conn.sendall(
            server_frame(TEXT, b"hel", final=False)
            + server_frame(PING, b"two")  # a control frame between fragments
            + server_frame(CONT, b"lo", final=False)
            + server_frame(CONT, b"!")
            + server_frame(CLOSE, (1001).to_bytes(2, "big") + b"going away")
        )
        seen.extend(read_client_frame(conn) for _ in range(2))

    with stand_in(script) as url:
        ws = WebSocket.connect(url)
        assert ws.recv(timeout_s=10) == ("text", b"hello!")
        assert ws.recv(timeout_s=10) is None
        assert ws.close_code == 1001
        ws.close()
    assert seen == [(PONG, b"one"), (PONG, b"two"), (CLOSE, (1001).to_bytes(2, "big"))]


@pytest.mark.parametrize(
    ("frames", "close_code"),
    [
        (bytes((FIN | BINARY, 0x80 | 4)) + b"mask" + b"data", 1002),  # a server must not mask
        (bytes((FIN | 0x40 | BINARY, 0)), 1002),  # a reserved bit, no extension agreed
        (server_frame(CONT, b"no start"), 1002),
        (server_frame(PING, b"x", final=False), 1002),
        (server_frame(0x3, b"?"), 1002),  # an opcode RFC 6455 reserves
        (server_frame(TEXT, b"\xff\xfe"), 1007),  # not UTF-8
        # only the head of a message one byte over the cap: refused before its payload
        (bytes((FIN | BINARY, 127)) + (MAX_MESSAGE_BYTES + 1).to_bytes(8, "big"), 1009),
    ],
)
def test_a_broken_frame_is_refused_with_a_close_that_says_why(
    frames: bytes, close_code: int
) -> None:
    closes: list[tuple[int, bytes]] = []

    def script(conn: socket.socket, key: str) -> None:
        conn.sendall(switching(key) + frames)
        closes.append(read_client_frame(conn))

    with stand_in(script) as url:
        ws = WebSocket.connect(url)
        with pytest.raises(ProtocolError):
            ws.recv(timeout_s=10)
    assert closes[0][0] == CLOSE
    assert int.from_bytes(closes[0][1][:2], "big") == close_code


def test_close_wakes_a_thread_waiting_in_recv_though_the_server_never_answers() -> None:
    """The user's side ends the session while another thread waits for output: close()
    shuts the socket down, which wakes that thread (closing alone would not)."""
    results: list[object] = []
    first = threading.Event()

    def script(conn: socket.socket, key: str) -> None:
        conn.sendall(switching(key) + server_frame(BINARY, b"output"))
        assert read_client_frame(conn)[0] == CLOSE
        while conn.recv(4096):  # no answer to the close, until the client hangs up
            pass

    def receive(ws: WebSocket) -> None:
        results.append(ws.recv(timeout_s=10))
        first.set()
        results.append(ws.recv())  # waits with no timeout

    with stand_in(script) as url:
        ws = WebSocket.connect(url)
        waiting = threading.Thread(target=receive, args=(ws,))
        waiting.start()
        assert first.wait(10)
        ws.close()
        waiting.join(10)
    assert results == [("binary", b"output"), None]
    assert ws.close_code is None  # the server never sent one


def test_a_wrong_accept_key_is_rejected() -> None:
    def script(conn: socket.socket, key: str) -> None:
        conn.sendall(switching(key, accept=base64.b64encode(b"x" * 20).decode()))

    with stand_in(script) as url, pytest.raises(ConnectionError, match="Sec-WebSocket-Accept"):
        WebSocket.connect(url)


def test_a_refusal_with_a_chunked_body_is_read_whole() -> None:
    def script(conn: socket.socket, key: str) -> None:
        conn.sendall(
            b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'9\r\n{"detail"\r\n9\r\n: "busy"}\r\n0\r\n\r\n'
        )

    with stand_in(script) as url, pytest.raises(WebSocketRefused) as refused:
        WebSocket.connect(url)
    assert (refused.value.status, refused.value.body) == (409, b'{"detail": "busy"}')


# -- without a server -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("wss://api.example.org/a?rows=24", ("https", "api.example.org", None, "/a?rows=24")),
        ("ws://127.0.0.1:8765", ("http", "127.0.0.1", 8765, "/")),
        ("https://[::1]:9000/x", ("https", "::1", 9000, "/x")),
        ("http://h/p#fragment", ("http", "h", None, "/p")),
    ],
)  # fmt: skip
def test_urls(url: str, endpoint: tuple[str, str, int | None, str]) -> None:
    assert parse_url(url) == Endpoint(*endpoint)


@pytest.mark.parametrize("url", ["ftp://h/x", "ws:///nohost", "ws://h:port/x"])
def test_bad_urls(url: str) -> None:
    with pytest.raises(ValueError, match="bad WebSocket URL"):
        parse_url(url)


def test_importing_the_client_loads_no_ssl() -> None:
    """ssl costs a CLI call as much as its request: only a wss:// connection imports it."""
    code = "import sys, railyard.client.websocket; print('ssl' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"
