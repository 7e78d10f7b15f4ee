"""``/v1/jobs/{id}/terminal``: an interactive job's terminal over a WebSocket (``railyard run``);
``/v1/jobs/{id}/attach?rank=R``: a new shell in a running job's rank (``railyard attach``).

The bearer token comes in the upgrade request, as every route's. Refusals come after the
accept, as one JSON text message ``{"status", "detail"}`` and a close code of 4000 plus the
HTTP status the same refusal gets elsewhere (a browser cannot read an upgrade's refusal).
Then the bridge: the client's frames go to the wrapper's socket (only input, window size and
the signals :mod:`railyard.exec.terminal` allows), the wrapper's bytes come back as binary
messages, until either side ends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

from fastapi import APIRouter, HTTPException, WebSocket
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocketDisconnect

from railyard.client import frames
from railyard.control.api.deps import Context, _identify
from railyard.control.api.errors import status_of
from railyard.control.errors import ServiceError
from railyard.control.store.tables import User
from railyard.control.usecases.terminal import attach_files, terminal_socket
from railyard.exec import attach, terminal
from railyard.exec.protocol import ExecutorError

router = APIRouter(tags=["jobs"])
CLOSE_BASE = 4000
ATTACH_LINGER_S = 5.0  # an attached shell whose client is gone is hung up after this
CONNECT_WAIT_S = 10.0  # from the job's start to its wrapper's listening socket


def _caller(ctx: Context, authorization: str) -> User:
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise HTTPException(401, "missing bearer token")
    return _identify(ctx, token.strip())


def _socket_of(ctx: Context, authorization: str, job_id: str) -> socket.socket:
    user = _caller(ctx, authorization)
    assert ctx.state_dir is not None
    with ctx.store.session() as session:
        path = terminal_socket(session, user, job_id, ctx.state_dir)
    return _connect(path, job_id)


def _connect(path: Path, job_id: str) -> socket.socket:
    """The wrapper's socket: a job runs once launched, and its wrapper listens a moment
    later, so a missing or refusing socket is retried for a few seconds."""
    deadline = time.monotonic() + CONNECT_WAIT_S
    while True:
        try:
            return terminal.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            if time.monotonic() >= deadline:
                raise _unreachable(job_id, exc) from None
        except OSError as exc:
            raise _unreachable(job_id, exc) from None
        time.sleep(0.01)


def _unreachable(job_id: str, exc: OSError) -> HTTPException:
    why = exc.strerror or str(exc)
    return HTTPException(409, f"job {job_id}'s terminal cannot be reached ({why}); "
                         "interactive jobs run on the server's machine")  # fmt: skip


def _attached(ctx: Context, authorization: str, job_id: str, rank: int) -> socket.socket:
    """A new shell in the rank's step, as its user (``railyard attach``)."""
    user = _caller(ctx, authorization)
    assert ctx.state_dir is not None
    with ctx.store.session() as session:
        task, records = attach_files(session, user, job_id, rank, ctx.state_dir, ctx.spool_dir)
    try:
        path = attach.start(task, records, ATTACH_LINGER_S)
    except (ExecutorError, OSError) as exc:
        raise HTTPException(409, f"job {job_id} rank {rank}: {exc}") from None
    return _connect(path, job_id)


@router.websocket("/v1/jobs/{job_id}/terminal")
async def job_terminal(websocket: WebSocket, job_id: str) -> None:
    """The terminal of an interactive job (``railyard run``, ``alloc``)."""
    auth = websocket.headers.get("authorization", "")
    await _bridge(websocket, lambda ctx: _socket_of(ctx, auth, job_id))


@router.websocket("/v1/jobs/{job_id}/attach")
async def job_attach(websocket: WebSocket, job_id: str, rank: int = 0) -> None:
    """A new shell inside a running job's rank, as its user (``railyard attach``)."""
    auth = websocket.headers.get("authorization", "")
    await _bridge(websocket, lambda ctx: _attached(ctx, auth, job_id, rank))


async def _bridge(websocket: WebSocket, open_socket: Callable[[Context], socket.socket]) -> None:
    ctx: Context = websocket.app.state.railyard
    await websocket.accept()
    try:
        sock = await run_in_threadpool(open_socket, ctx)
    except (HTTPException, ServiceError) as exc:
        status, detail = (
            (exc.status_code, str(exc.detail))
            if isinstance(exc, HTTPException)
            else (status_of(exc), exc.line())
        )
        await websocket.send_text(json.dumps({"status": status, "detail": detail}))
        await websocket.close(code=CLOSE_BASE + status)
        return
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    to_task = asyncio.create_task(_client_to_task(websocket, writer))
    try:
        while data := await reader.read(frames.CHUNK_BYTES):
            await websocket.send_bytes(data)
    except (OSError, WebSocketDisconnect):
        pass
    finally:
        to_task.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await websocket.close(code=1000)


async def _client_to_task(websocket: WebSocket, writer: asyncio.StreamWriter) -> None:
    """Forward the client's frames that the wrapper may take; anything else ends the bridge."""
    reader = frames.FrameReader()
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            data = message.get("bytes") or b""
            for kind, payload in reader.feed(data):
                if kind not in frames.TO_TASK:
                    raise ValueError(f"frame type {kind!r} is not for the task")
                writer.write(frames.frame(kind, payload))
            await writer.drain()
    except (OSError, ValueError, WebSocketDisconnect):
        pass
    finally:
        writer.close()
