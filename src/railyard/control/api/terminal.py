"""``/v1/jobs/{id}/terminal``: an interactive job's terminal over a WebSocket (``railyard run``);
``/v1/jobs/{id}/attach?rank=R``: a new shell in a running job's rank (``railyard attach``);
``/v1/jobs/{id}/ssh?rank=R``: an SSH connection to ``sshd -i`` there (``railyard proxy``,
`exec.terminals.sshd`).

The bearer token comes in the upgrade request, as every route's. Refusals come after the
accept, as one JSON text message ``{"status", "detail"}`` and a close code of 4000 plus the
HTTP status the same refusal gets elsewhere (a browser cannot read an upgrade's refusal).
Then the bridge: the client's frames go to the wrapper's socket (only input, window size and
the signals :mod:`railyard.exec.terminals.terminal` allows), the wrapper's bytes come back as binary
messages, until either side ends. The socket is where the job runs: this machine, or a Ray
node, through its agent's relay (`exec.terminals.jobsocket`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import Counter
from collections.abc import Callable

from fastapi import APIRouter, HTTPException, WebSocket
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocketDisconnect, WebSocketState

from railyard.client import frames
from railyard.control.api.deps import Context, _identify
from railyard.control.api.errors import status_of
from railyard.control.errors import ServiceError
from railyard.control.store.tables import User
from railyard.control.usecases.activity import Activity
from railyard.control.usecases.terminal import attach_target, terminal_socket
from railyard.exec.terminals import jobsocket
from railyard.exec.terminals.jobsocket import JobSocket, SocketUnreachable

router = APIRouter(tags=["jobs"])
CLOSE_BASE = 4000
TOO_BIG = 1009  # RFC 6455: a message too big to process
CHECK_INLINE_BYTES = 64 * 1024  # a larger message's frames are checked off the event loop
ATTACH_PER_JOB = 8


def _caller(ctx: Context, authorization: str) -> User:
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise HTTPException(401, "missing bearer token")
    return _identify(ctx, token.strip())


def _terminal_target(ctx: Context, authorization: str, job_id: str) -> JobSocket:
    user = _caller(ctx, authorization)
    assert ctx.state_dir is not None
    with ctx.store.session() as session:
        return terminal_socket(session, user, job_id, ctx.state_dir)


class AttachSlots:
    """At most ``per_job`` attached shells of one job at once: each is a process the server
    starts, so one user's loop of attaches cannot make it fork without bound."""

    def __init__(self, per_job: int = ATTACH_PER_JOB, what: str = "attached shells") -> None:
        self.per_job, self.live, self.lock = per_job, Counter[str](), threading.Lock()
        self.what = what

    def take(self, job_id: str) -> None:
        with self.lock:
            if self.live[job_id] >= self.per_job:
                raise HTTPException(409, f"job {job_id} has {self.per_job} {self.what} "
                                    "already (hint: leave one first)")  # fmt: skip
            self.live[job_id] += 1

    def give(self, job_id: str) -> None:
        with self.lock:
            self.live[job_id] -= 1
            if self.live[job_id] <= 0:
                del self.live[job_id]


ATTACHED = AttachSlots()
SSH_SESSIONS = AttachSlots(what="SSH connections")  # an editor opens a few at once


def _attached_target(
    ctx: Context, authorization: str, job_id: str, rank: int, pty: bool, ssh: bool = False
) -> JobSocket:
    """A new shell (or with ``ssh`` an ``sshd -i``) in the rank's step, as its user, started
    on the rank's machine when it is connected to (`exec.terminals.jobsocket`)."""
    user = _caller(ctx, authorization)
    assert ctx.state_dir is not None
    with ctx.store.session() as session:
        return attach_target(session, user, job_id, rank, (ctx.state_dir, ctx.spool_dir),
                             pty=pty, ssh=ssh)  # fmt: skip


def _unreachable(target: JobSocket, exc: SocketUnreachable) -> HTTPException:
    if target.kind == "attach":
        return HTTPException(409, f"job {target.job_id} rank {target.rank}: {exc}")
    return HTTPException(409, f"job {target.job_id}'s terminal cannot be reached ({exc})")


@router.websocket("/v1/jobs/{job_id}/terminal")
async def job_terminal(websocket: WebSocket, job_id: str) -> None:
    """The terminal of an interactive job (``railyard run``, ``alloc``)."""
    auth = websocket.headers.get("authorization", "")
    await _bridge(websocket, job_id, lambda ctx: _terminal_target(ctx, auth, job_id))


@router.websocket("/v1/jobs/{job_id}/attach")
async def job_attach(websocket: WebSocket, job_id: str, rank: int = 0, pty: bool = True) -> None:
    """A new shell inside a running job's rank, as its user (``railyard attach``); with
    ``pty=false`` on pipes, for a client whose input is not a terminal."""
    auth = websocket.headers.get("authorization", "")
    await _slotted(
        websocket, job_id, ATTACHED, lambda ctx: _attached_target(ctx, auth, job_id, rank, pty)
    )


@router.websocket("/v1/jobs/{job_id}/ssh")
async def job_ssh(websocket: WebSocket, job_id: str, rank: int = 0) -> None:
    """An SSH connection into a running job's rank, as its user (``railyard proxy``)."""
    auth = websocket.headers.get("authorization", "")
    await _slotted(
        websocket, job_id, SSH_SESSIONS,
        lambda ctx: _attached_target(ctx, auth, job_id, rank, False, True),
    )  # fmt: skip


async def _slotted(
    websocket: WebSocket, job_id: str, slots: AttachSlots, find: Callable[[Context], JobSocket]
) -> None:
    """A bridge to a process the server starts for this connection, within ``slots``."""
    await websocket.accept()
    try:
        slots.take(job_id)
    except HTTPException as exc:
        await _refuse(websocket, exc)
        return
    try:
        await _bridge(websocket, job_id, find)
    finally:
        slots.give(job_id)


async def _refuse(websocket: WebSocket, exc: HTTPException | ServiceError) -> None:
    if isinstance(exc, HTTPException):
        status, detail = exc.status_code, str(exc.detail)
    else:
        status, detail = status_of(exc), exc.line()
    await websocket.send_text(json.dumps({"status": status, "detail": detail}))
    await websocket.close(code=CLOSE_BASE + status)


async def _bridge(websocket: WebSocket, job_id: str, find: Callable[[Context], JobSocket]) -> None:
    ctx: Context = websocket.app.state.railyard
    if websocket.client_state == WebSocketState.CONNECTING:
        await websocket.accept()
    try:
        target = await run_in_threadpool(find, ctx)  # the store
        try:  # here, or on the job's node (an attach forks there)
            sock = await jobsocket.connect(target, ctx.remote_socket)
        except SocketUnreachable as exc:
            raise _unreachable(target, exc) from None
        reader, writer = await asyncio.open_connection(sock=sock)
    except (HTTPException, ServiceError) as exc:
        await _refuse(websocket, exc)
        return
    to_task = asyncio.create_task(_client_to_task(websocket, writer, job_id, ctx.activity))
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


async def _client_to_task(
    websocket: WebSocket, writer: asyncio.StreamWriter, job_id: str, activity: Activity | None
) -> None:
    """Forward the client's frames that the wrapper may take, as the bytes they came in;
    anything else ends the bridge, and a message over ``frames.MAX_MESSAGE_BYTES`` closes it
    with 1009. What the client sends is the job's activity (its queue's idle limit counts
    from it). A large message is checked on a worker thread: its frames may be a megabyte of
    tiny ones (issue 52), and the event loop serves everyone."""
    checker = frames.FrameChecker(frames.TO_TASK)
    loop = asyncio.get_running_loop()
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            data = message.get("bytes") or b""
            if len(data) > frames.MAX_MESSAGE_BYTES:
                await websocket.close(code=TOO_BIG, reason=f"a message over "
                                      f"{frames.MAX_MESSAGE_BYTES} bytes")  # fmt: skip
                break
            if len(data) > CHECK_INLINE_BYTES:
                await run_in_threadpool(checker.check, data)
            else:
                checker.check(data)
            writer.write(data)
            await writer.drain()
            if activity is not None and activity.due(job_id):  # written off the event loop
                loop.run_in_executor(None, activity.touch, job_id)
    except (OSError, ValueError, WebSocketDisconnect):
        pass
    finally:
        writer.close()
