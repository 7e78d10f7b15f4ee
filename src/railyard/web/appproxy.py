"""``/ui/jobs/N/app/...``: a user's web app (JupyterLab, ``railyard jupyter --app``) served
through the dashboard, to the job's owner alone, HTTP and WebSockets.

Who: the dashboard's session cookie (`web.session`), as every page; the owner only, an
admin too gets "no job" (`control.usecases.apps`), and a WebSocket's ``Origin`` must be this
server (a page elsewhere cannot open one with the user's cookie). Where: `exec.appsocket`
connects and checks that the job's account answers, before a byte is sent, on the machine the
app runs on (`exec.jobsocket`: here, or a Ray node through its agent's relay). What: the
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
import socket
from collections.abc import AsyncIterator
from typing import Any

import h11
from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection
from starlette.websockets import WebSocketDisconnect
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import WebSocketException

from railyard.control.errors import NotFound, ServiceError
from railyard.control.usecases.apps import app_target
from railyard.exec import jobsocket
from railyard.exec.jobsocket import JobSocket, SocketUnreachable
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


def router() -> APIRouter:
    r = APIRouter(include_in_schema=False)

    @r.api_route("/ui/jobs/{job_id}/app/{rest:path}", methods=METHODS)
    async def app_http(request: Request, job_id: str, rest: str) -> Response:
        if request.method not in SAFE and not _same_origin(request):
            return _page(403, "a request that changes something must come from this server's pages")
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


def _target_path(conn: HTTPConnection) -> str:
    query = conn.url.query
    return conn.url.path + (f"?{query}" if query else "")


async def _forward(request: Request, sock: socket.socket) -> Response:
    reader, writer = await asyncio.open_connection(sock=sock)
    conn = h11.Connection(h11.CLIENT)
    body = await request.body()
    headers = _request_headers(request)
    headers += [(b"connection", b"close"), (b"content-length", str(len(body)).encode())]
    try:
        writer.write(conn.send(h11.Request(method=request.method, target=_target_path(request),
                                           headers=headers)))  # fmt: skip
        if body:
            writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        head = await _next(conn, reader, h11.Response)
    except (OSError, h11.ProtocolError) as exc:
        writer.close()
        return _page(502, f"the app answered badly: {exc}")
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
    uri = f"ws://{websocket.headers.get('host', 'localhost')}{_target_path(websocket)}"
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
