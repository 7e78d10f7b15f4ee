"""``/ui/jobs/N/app/...``: a user's web app (JupyterLab, ``railyard jupyter --app``) served
through the dashboard, to the job's owner alone, HTTP and WebSockets.

Who: the dashboard's session cookie (`web.session`), as every page; the owner only, an
admin too gets "no job" (`control.usecases.apps`), and a WebSocket's ``Origin`` must be this
server (a page elsewhere cannot open one with the user's cookie). Where: `exec.terminals.appsocket`
connects and checks that the job's account answers, before a byte is sent, on the machine the
app runs on (`exec.terminals.jobsocket`: here, or a Ray node through its agent's relay). What: the
request as it came, less railyard's own cookies and any ``Authorization`` (the app never sees
the user's session or token), with ``Connection: close``; the answer as it comes, less any
``Set-Cookie`` of railyard's names, ``Service-Worker-Allowed`` (a worker's scope stays the
app's path) and ``Clear-Site-Data``. The app's pages carry their own headers (JupyterLab needs
its inline scripts), not the dashboard's CSP: this path is the app's. What the client sends
is the job's activity (its queue's idle limit, `control.usecases.activity`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import h11
from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, HTTPConnection
from starlette.websockets import WebSocketDisconnect
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import WebSocketException

from railyard.client.bounds import MAX_REQUEST_BYTES
from railyard.control.errors import NotFound, ServiceError
from railyard.control.usecases.apps import app_target
from railyard.exec.terminals import jobsocket
from railyard.exec.terminals.jobsocket import JobSocket, SocketUnreachable
from railyard.web.login import LOGIN_PATH
from railyard.web.page import esc, page
from railyard.web.session import viewer

OURS = b"railyard"  # the prefix of the dashboard's cookie names
HOP = frozenset((b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization",
                 b"te", b"trailer", b"transfer-encoding", b"upgrade", b"content-length",
                 b"authorization", b"cookie", b"host"))  # fmt: skip
# What an app may not answer: a service worker for all of the origin (it would serve the
# dashboard's pages), or an order to clear the origin's cookies and storage.
DROPPED = frozenset((b"service-worker-allowed", b"clear-site-data"))
SAFE = frozenset(("GET", "HEAD", "OPTIONS"))
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
CHUNK_BYTES = 65536
MAX_BODY_BYTES = MAX_REQUEST_BYTES  # a request's body to an app, streamed (the API's cap too)
TARGET = re.compile(rb"[\x21-\x7e]+")  # a request target HTTP/1.1 can carry (h11's rule)


def router() -> APIRouter:
    r = APIRouter(include_in_schema=False)

    @r.api_route("/ui/jobs/{job_id}/app/{rest:path}", methods=METHODS)
    async def app_http(request: Request, job_id: str, rest: str) -> Response:
        if request.method not in SAFE and not _same_origin(request):
            return _page(403, "a request that changes something must come from this server's pages")
        refused = _unfit(request)
        if refused is not None:
            return refused
        found = await run_in_threadpool(_target, request, job_id)
        if isinstance(found, Response):
            return found
        try:
            sock = await _connect(request, found)
        except SocketUnreachable as exc:
            return _page(409, f"Job {job_id}'s app cannot be reached: {exc}.")
        _touch(request, job_id)
        return await _forward(request, sock)

    @r.api_route("/ui/jobs/{job_id}/app", methods=["GET"])
    async def app_root(job_id: str) -> Response:
        return RedirectResponse(f"/ui/jobs/{job_id}/app/", status_code=307)

    @r.websocket("/ui/jobs/{job_id}/app/{rest:path}")
    async def app_ws(websocket: WebSocket, job_id: str, rest: str) -> None:
        if not _same_origin(websocket, required=True):  # a page elsewhere, the user's cookie
            await websocket.close(code=4403)
            return
        if _target_path(websocket) is None:
            await websocket.close(code=4400)
            return
        found = await run_in_threadpool(_target, websocket, job_id)
        if isinstance(found, Response):
            await websocket.close(code=4000 + found.status_code)
            return
        try:
            sock = await _connect(websocket, found)
        except SocketUnreachable:
            await websocket.close(code=4409)
            return
        await _bridge_ws(websocket, sock, job_id)

    return r


def _same_origin(conn: HTTPConnection, *, required: bool = False) -> bool:
    """The request's ``Origin`` is this server (a page of another port of this host is the
    same *site*, so the session cookie alone would go along); without one, only where a
    browser always sends it (a WebSocket) is that a refusal."""
    origin = conn.headers.get("origin")
    if origin is None:
        return not required
    return origin.split("://", 1)[-1] == conn.headers.get("host", "")


async def _connect(conn: HTTPConnection, target: JobSocket) -> socket.socket:
    """The app's socket on its machine (here, or a Ray node through its agent), its
    listener checked there to be the job's account."""
    return await jobsocket.connect(target, conn.app.state.railyard.remote_socket, wait_s=0.0)


def _target(conn: HTTPConnection, job_id: str) -> JobSocket | Response:
    """The owner's app, or the page that says why not (the login page for no session)."""
    ctx = conn.app.state.railyard
    with ctx.store.session() as session:
        who = viewer(conn, session, ctx.clock())  # type: ignore[arg-type]
        if who is None:
            return RedirectResponse(LOGIN_PATH, status_code=303)
        try:
            return app_target(session, who.user, job_id, ctx.spool_dir)
        except ServiceError as exc:
            status = 404 if isinstance(exc, NotFound) else 409
            return _page(status, exc.line())


def _page(status: int, line: str) -> HTMLResponse:
    return page("App", f"<p>{esc(line)}</p>", user=None, status=status)


def _touch(conn: HTTPConnection, job_id: str) -> None:
    activity = conn.app.state.railyard.activity
    if activity is not None and activity.due(job_id):
        asyncio.get_running_loop().run_in_executor(None, activity.touch, job_id)


def _cookies(raw: str) -> str:
    """The request's cookies less the dashboard's own."""
    kept = [c.strip() for c in raw.split(";") if c.strip() and not c.strip().startswith("railyard")]
    return "; ".join(kept)


def _request_headers(conn: HTTPConnection) -> list[tuple[bytes, bytes]]:
    headers = [(k, v) for k, v in conn.headers.raw if k.lower() not in HOP]
    headers.append((b"host", conn.headers.get("host", "localhost").encode()))
    cookies = _cookies(conn.headers.get("cookie", ""))
    if cookies:
        headers.append((b"cookie", cookies.encode()))
    headers.append((b"x-forwarded-proto", conn.url.scheme.encode()))
    return headers


def _target_path(conn: HTTPConnection) -> str | None:
    """The request's target as the client sent it (still percent-encoded: a decoded ``%00``
    or space is no target at all), or None when HTTP/1.1 allows no such target."""
    raw = conn.scope.get("raw_path") or conn.url.path.encode()
    query = conn.scope.get("query_string") or b""
    target = raw + (b"?" + query if query else b"")
    if not TARGET.fullmatch(target):
        return None
    return target.decode("ascii")


def _unfit(request: Request) -> Response | None:
    """Why the request cannot go to the app whatever the app is (a 4xx), or None."""
    if _target_path(request) is None:
        return _page(400, "this path is not one HTTP/1.1 can send on (hint: percent-encode it)")
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
        return _page(413, f"a request body of at most {MAX_BODY_BYTES} bytes goes to an app")
    return None


async def _forward(request: Request, sock: socket.socket) -> Response:
    reader, writer = await asyncio.open_connection(sock=sock)
    conn = h11.Connection(h11.CLIENT)
    target = _target_path(request)
    assert target is not None, "_unfit() refused it"
    headers = [*_request_headers(request), (b"connection", b"close"), *_framing(request)]
    try:
        writer.write(conn.send(h11.Request(method=request.method, target=target,
                                           headers=headers)))  # fmt: skip
        refused = await _send_body(request, conn, writer)
        if refused is not None:
            writer.close()
            return refused
        head = await _next(conn, reader, h11.Response)
    except ClientDisconnect:  # before its body was all sent: nobody reads an answer
        writer.close()
        return _page(400, "the client left before its request's body was sent")
    except (OSError, h11.ProtocolError) as exc:
        writer.close()
        return _page(502, f"the app answered badly: {exc}")
    except BaseException:  # the server's own body cap (a 413), or a cancel
        writer.close()
        raise
    assert isinstance(head, h11.Response)
    response = StreamingResponse(_body(conn, reader, writer), status_code=head.status_code)
    for name, value in head.headers:
        if name in HOP and name != b"content-length":
            continue
        if name == b"set-cookie" and value.lstrip().startswith(OURS):
            continue  # the app may not set the dashboard's cookies
        if name in DROPPED:
            continue
        response.raw_headers.append((name, value))
    return response


def _framing(request: Request) -> list[tuple[bytes, bytes]]:
    """How the body is delimited to the app: the client's length, else chunks as they come
    for a client that sends chunks, else no body."""
    length = request.headers.get("content-length")
    if length is not None:
        return [(b"content-length", length.encode())]
    if "chunked" in request.headers.get("transfer-encoding", "").lower():
        return [(b"transfer-encoding", b"chunked")]
    return [(b"content-length", b"0")]


async def _send_body(
    request: Request, conn: h11.Connection, writer: asyncio.StreamWriter
) -> Response | None:
    """The body to the app piece by piece as it comes (never whole in memory), up to
    ``MAX_BODY_BYTES``; the 413 past it, else None."""
    sent = 0
    async for piece in request.stream():
        sent += len(piece)
        if sent > MAX_BODY_BYTES:
            return _page(413, f"a request body of at most {MAX_BODY_BYTES} bytes goes to an app")
        if piece:
            writer.write(conn.send(h11.Data(data=piece)))
            await writer.drain()
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()
    return None


async def _next(conn: h11.Connection, reader: asyncio.StreamReader, kind: type) -> Any:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(CHUNK_BYTES))
        elif isinstance(event, kind):
            return event
        elif isinstance(event, h11.ConnectionClosed):
            raise OSError("the app closed the connection")


async def _body(
    conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> AsyncIterator[bytes]:
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(CHUNK_BYTES))
            elif isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                return
    except (OSError, h11.ProtocolError):
        return
    finally:
        writer.close()


async def _bridge_ws(websocket: WebSocket, sock: socket.socket, job_id: str) -> None:
    """The browser's WebSocket to the app's, message for message, until either ends."""
    protocols = [p.strip() for p in websocket.headers.get("sec-websocket-protocol", "").split(",")
                 if p.strip()]  # fmt: skip
    keep = {b"cookie", b"origin", b"user-agent"}
    headers = [(k.decode(), v.decode()) for k, v in _request_headers(websocket) if k in keep]
    uri = f"ws://{websocket.headers.get('host', 'localhost')}{_target_path(websocket) or '/'}"
    try:
        upstream = await ws_connect(uri, sock=sock, additional_headers=headers,
                                    subprotocols=protocols or None,  # type: ignore[arg-type]
                                    max_size=None, compression=None)  # fmt: skip
    except (OSError, WebSocketException):
        sock.close()
        await websocket.close(code=4502)
        return
    await websocket.accept(subprotocol=upstream.subprotocol)

    async def to_app() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            _touch(websocket, job_id)
            data = message.get("bytes")
            await upstream.send(data if data is not None else message.get("text") or "")

    async def to_browser() -> None:
        async for data in upstream:
            if isinstance(data, bytes):
                await websocket.send_bytes(data)
            else:
                await websocket.send_text(data)

    tasks = [asyncio.create_task(to_app()), asyncio.create_task(to_browser())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    except (WebSocketDisconnect, WebSocketException, OSError):
        pass
    finally:
        for task in tasks:
            task.cancel()
        await upstream.close()
        with contextlib.suppress(Exception):
            await websocket.close()
