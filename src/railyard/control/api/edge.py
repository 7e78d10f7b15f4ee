"""The API's edge: what one client may hold of the server before it has asked for anything
(issue 52: ~21,000 half-sent requests from one local account took every descriptor, and
``/healthz`` and submits failed with them).

uvicorn's own limits do part of it and are used as they are: an idle keep-alive connection
closes after ``keep_alive_s``, a WebSocket message over ``ws_max_size_bytes`` is closed with
1009. What uvicorn lacks (and why it is here, in one small guard):

- a deadline for a request's headers: uvicorn waits forever for headers that never end, and
  its keep-alive timer stops at the first byte of the next request;
- a bound on the bytes of headers (httptools, its C parser, keeps whatever comes; h11's
  ``max_incomplete_event_size`` is not the parser in use);
- caps on connections, overall and per peer address, under the descriptor budget.
  ``limit_concurrency`` does not fit: past it uvicorn answers 503 to every new request,
  ``/healthz`` included, so half-open connections that never ask anything would win.

So a connection waiting for a request (one just made, or idle between requests) is
``waiting``; when a new connection would pass a cap, the oldest waiting one (of that peer,
for the peer's cap) is closed to make room, and only if none is waiting is the newcomer
refused. A client that sends its request at once is never the oldest waiting, so an
attacker's thousands of half-sent requests make room for it. A request's body must keep
coming (``body_timeout_s`` between its pieces), or the connection is closed.

The guard sees connections at two levels: the protocol (:class:`GuardedProtocol`, wrapped
around uvicorn's, sees a connection made, its bytes and its end) and the app
(:class:`EdgeApp`, around the ASGI app, sees a request start and end), which name a
connection by its peer's address and port (so the proxy headers a trusted proxy sends are
applied inside, after the guard has read the real peer).
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.auto import AutoHTTPProtocol

log = logging.getLogger("railyard.edge")

RESERVED_FDS = 256  # the store, logs, job sockets and pipes beside the API's connections
FDS_PER_CONNECTION = 2  # a terminal or app connection holds a socket to the job as well
MOST_CONNECTIONS = 16384  # the default cap however many descriptors there are (memory)
SWEEP_S = 0.5

Key = tuple[str, int]  # a connection: its peer's address and port


@dataclass(frozen=True)
class EdgeLimits:
    """What one client, and all of them, may hold of the API server."""

    max_connections: int | None = None  # None: the descriptor budget's (descriptor_budget)
    max_connections_per_peer: int = 1024  # one address (a login node's users share one)
    header_timeout_s: float = 15.0  # a request's line and headers, from its first wait
    body_timeout_s: float = 30.0  # between two pieces of a request's body
    max_header_bytes: int = 64 * 1024
    keep_alive_s: int = 5  # uvicorn's: an idle connection between requests
    ws_max_size_bytes: int = 16 * 1024 * 1024  # uvicorn's: one WebSocket message (1009 past)
    # The kernel's queue of connections not yet accepted, and so how many the event loop takes
    # in one go (uvloop accepts until the queue is empty): at uvicorn's 2,048, a flood of
    # connects stalled every other request behind thousands of accepts (bob's 21,000
    # half-sent requests: /healthz p99 290-1,010 ms at load 2, 117-124 ms at 128, the flood
    # itself slowed instead). asyncio's default is 100, nginx's 511.
    listen_backlog: int = 128


def raise_descriptor_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError) as exc:
            log.warning("cannot raise the descriptor limit from %d: %s", soft, exc)
    return soft


def descriptor_budget(nofile: int) -> int:
    """How many connections ``nofile`` descriptors serve, beside the server's own."""
    return max(16, (nofile - RESERVED_FDS) // FDS_PER_CONNECTION)


def within_budget(limits: EdgeLimits, nofile: int) -> tuple[EdgeLimits, str | None]:
    """``limits`` with the overall cap set (the budget's, or the one asked within it) and
    the per-peer cap no higher; and a line to say so when an asked cap was lowered."""
    budget = descriptor_budget(nofile)
    asked = limits.max_connections
    cap = min(asked if asked is not None else MOST_CONNECTIONS, budget)
    said = None
    if asked is not None and asked > budget:
        said = (f"--max-connections {asked} is more than {nofile} descriptors serve; "
                f"{cap} connections at most")  # fmt: skip
    per_peer = min(limits.max_connections_per_peer, cap)
    return replace(limits, max_connections=cap, max_connections_per_peer=per_peer), said


class _Conn:
    __slots__ = ("header_bytes", "key", "since", "transport", "waiting")

    def __init__(self, key: Key, transport: asyncio.BaseTransport, now: float) -> None:
        self.key, self.transport, self.since = key, transport, now
        self.waiting, self.header_bytes = False, 0


class ConnectionGuard:
    """The connections of one server: their caps, the waiting ones' deadline, the counts."""

    def __init__(self, limits: EdgeLimits, clock: Callable[[], float] = time.monotonic) -> None:
        assert limits.max_connections is not None, "within_budget() sets it"
        self.limits, self.clock = limits, clock
        self.most, self.most_per_peer = limits.max_connections, limits.max_connections_per_peer
        self.live: dict[Key, _Conn] = {}
        self.per_peer: Counter[str] = Counter()
        self.waiting: OrderedDict[Key, _Conn] = OrderedDict()  # oldest wait first
        self.waiting_by_peer: dict[str, OrderedDict[Key, _Conn]] = {}
        self.refused = self.evicted = self.timed_out = 0
        self._sweep: asyncio.TimerHandle | None = None

    # -- the protocol's side ------------------------------------------------------------

    def admit(self, transport: asyncio.BaseTransport) -> _Conn | None:
        """A new connection, made room for or refused (closed); None when refused, or when
        it is not a TCP connection (nothing to count it against)."""
        peer = transport.get_extra_info("peername")
        if not isinstance(peer, tuple) or len(peer) < 2:
            return None
        key: Key = (str(peer[0]), int(peer[1]))
        full_peer = self.per_peer[key[0]] >= self.most_per_peer
        if (full_peer and not self._evict(self.waiting_by_peer.get(key[0]))) or (
            len(self.live) >= self.most and not self._evict(self.waiting)
        ):
            self.refused += 1
            transport.close()
            return None
        conn = _Conn(key, transport, self.clock())
        self.live[key] = conn
        self.per_peer[key[0]] += 1
        self._wait(conn)
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_S, self._swept)
        return conn

    def received(self, conn: _Conn, size_bytes: int) -> bool:
        """Bytes came; False when a request's headers have passed their bound (then the
        caller closes). The bytes of the chunk that ends the headers count as headers too
        (the request starts after it), so it is the chunks before this one that are judged."""
        if not conn.waiting:
            return True
        if conn.header_bytes > self.limits.max_header_bytes:
            return False
        conn.header_bytes += size_bytes
        return True

    def release(self, conn: _Conn) -> None:
        if self.live.get(conn.key) is not conn:
            return
        self._unwait(conn)
        del self.live[conn.key]
        self.per_peer[conn.key[0]] -= 1
        if self.per_peer[conn.key[0]] <= 0:
            del self.per_peer[conn.key[0]]

    def close(self, conn: _Conn) -> None:
        self.release(conn)
        conn.transport.close()

    # -- the app's side -------------------------------------------------------------------

    def started(self, key: Key) -> None:
        """A request's headers are in: no longer waiting."""
        conn = self.live.get(key)
        if conn is not None:
            self._unwait(conn)

    def answered(self, key: Key) -> None:
        """A request was answered: the connection waits for the next one."""
        conn = self.live.get(key)
        if conn is not None and not conn.transport.is_closing():
            self._wait(conn)

    def ended(self, key: Key) -> None:
        """A WebSocket's session ended (its protocol, not ours, sees the connection end)."""
        conn = self.live.get(key)
        if conn is not None:
            self.release(conn)

    def timed_out_body(self, key: Key) -> None:
        conn = self.live.get(key)
        if conn is not None:
            self.timed_out += 1
            self.close(conn)

    # -- inside ---------------------------------------------------------------------------

    def _wait(self, conn: _Conn) -> None:
        self._unwait(conn)
        conn.waiting, conn.since, conn.header_bytes = True, self.clock(), 0
        self.waiting[conn.key] = conn
        self.waiting_by_peer.setdefault(conn.key[0], OrderedDict())[conn.key] = conn

    def _unwait(self, conn: _Conn) -> None:
        if not conn.waiting:
            return
        conn.waiting = False
        del self.waiting[conn.key]
        peers = self.waiting_by_peer[conn.key[0]]
        del peers[conn.key]
        if not peers:
            del self.waiting_by_peer[conn.key[0]]

    def _evict(self, queue: OrderedDict[Key, _Conn] | None) -> bool:
        """Close the oldest waiting connection of ``queue``; False when there is none."""
        if not queue:
            return False
        self.evicted += 1
        self.close(next(iter(queue.values())))
        return True

    def _swept(self) -> None:
        """Close the connections that have waited past the header timeout (oldest first)."""
        deadline = self.clock() - self.limits.header_timeout_s
        while self.waiting:
            oldest = next(iter(self.waiting.values()))
            if oldest.since > deadline:
                break
            self.timed_out += 1
            self.close(oldest)
        self._sweep = None
        if self.live:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_S, self._swept)


class GuardedProtocol(asyncio.Protocol):
    """uvicorn's HTTP protocol for one connection, with the guard told what it sees. After a
    WebSocket upgrade the transport speaks to uvicorn's WebSocket protocol instead (and
    :class:`EdgeApp` tells the guard when the session ends)."""

    def __init__(self, inner: asyncio.Protocol, guard: ConnectionGuard) -> None:
        self.inner, self.guard = inner, guard
        self.conn: _Conn | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)
        self.conn = self.guard.admit(transport)

    def data_received(self, data: bytes) -> None:
        if self.conn is not None and not self.guard.received(self.conn, len(data)):
            self.guard.close(self.conn)
            return
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.guard.release(self.conn)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def guarded_http(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """The protocol class uvicorn builds each connection with (``Config(http=...)``)."""

    class Guarded(GuardedProtocol):
        def __init__(self, **uvicorn_args: Any) -> None:
            super().__init__(AutoHTTPProtocol(**uvicorn_args), guard)

    return Guarded


class EdgeApp:
    """ASGI: tells the guard when a request starts and when it is answered (its last byte
    sent), and closes a connection whose request body stops coming for ``body_timeout_s``."""

    def __init__(self, app: ASGIApp, guard: ConnectionGuard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] not in ("http", "websocket") or not client:
            await self.app(scope, receive, send)
            return
        key: Key = (str(client[0]), int(client[1]))
        self.guard.started(key)
        if scope["type"] == "websocket":
            try:
                await self.app(scope, receive, send)
            finally:
                self.guard.ended(key)
            return
        answered = False

        async def sending(message: Message) -> None:
            nonlocal answered
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered = True  # the next request may start before the app returns
                self.guard.answered(key)

        try:
            await self.app(scope, self._timed(key, receive), sending)
        finally:
            if not answered:  # uvicorn answers for it (a 500), or the client left
                self.guard.answered(key)

    def _timed(self, key: Key, receive: Receive) -> Receive:
        body_done = False

        async def timed() -> Message:
            nonlocal body_done
            if body_done:  # a wait for the client's disconnect: as long as it takes
                return await receive()
            try:
                async with asyncio.timeout(self.guard.limits.body_timeout_s):
                    message = await receive()
            except TimeoutError:
                self.guard.timed_out_body(key)
                return {"type": "http.disconnect"}
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        return timed


def server_config(
    app: ASGIApp, limits: EdgeLimits, *, graceful_s: int | None = None
) -> tuple[uvicorn.Config, ConnectionGuard]:
    """uvicorn's config for the API with ``limits`` (their overall cap set: within_budget),
    and ``graceful_s`` for what is still open at a shutdown."""
    guard = ConnectionGuard(limits)
    # the proxy headers a trusted proxy (TLS on 127.0.0.1) sends, applied inside the guard
    # (uvicorn's default trust, FORWARDED_ALLOW_IPS or loopback)
    trusted = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
    inner = cast(ASGIApp, ProxyHeadersMiddleware(cast(Any, app), trusted_hosts=trusted))
    config = uvicorn.Config(
        EdgeApp(inner, guard),
        log_level="warning",
        http=guarded_http(guard),
        proxy_headers=False,
        timeout_keep_alive=limits.keep_alive_s,
        ws_max_size=limits.ws_max_size_bytes,
        timeout_graceful_shutdown=graceful_s,
        backlog=limits.listen_backlog,
    )
    return config, guard
