"""``railyard up`` on PostgreSQL: take the store's lease before anything is written, or wait
for it as a standby (`control.store.lease`).

Without ``--standby`` a live lease of another server refuses the start in one line, as the
advisory lock did (a dead holder on this machine, a lapsed lease: taken at once). With
``--standby`` the server binds its port and answers every request 503 with ``Retry-After``
and the active's URL (``active`` in the body, ``X-Railyard-Active``) until the lease is its
own; then it starts as a restart does: it bootstraps, adopts the running jobs (the same
attempt) and runs the loop. Clients with a list of servers move on to the next at such a 503
(`client.client`). SQLite serves one server: ``--standby`` there is refused.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from typing import Any

import uvicorn

from railyard.control.errors import error_body
from railyard.control.store.lease import Lease
from railyard.control.store.lock import StoreLocked

ACTIVE_HEADER = "X-Railyard-Active"


def take_lease(database_url: str | None, standby: bool, sock: socket.socket,
               api_url: str) -> Lease | None:  # fmt: skip
    """The lease for a PostgreSQL store (None for SQLite): taken now, or after waiting as a
    standby. A lease not :attr:`~Lease.held` on return: stopped (SIGTERM) while waiting.
    Raises :class:`StoreLocked` when another server is active and this is no standby."""
    if database_url is None or not database_url.startswith("postgres"):
        if standby:
            raise StoreLocked(
                "--standby needs a PostgreSQL store: SQLite serves one server (hint: "
                "--database-url postgresql+psycopg://HOST/DB on every server of the group)"
            )
        return None
    lease = Lease(database_url, f"pid {os.getpid()}, {api_url}", advertised(api_url))
    try:
        lease.migrate()
        current = lease.acquire()
    except BaseException:
        lease.close()
        raise
    if current is None:
        return lease
    if not standby:
        lease.close()
        raise StoreLocked(
            f"database {lease.where} is in use by another railyard server "
            f"(railyard {current.owner}) (hint: stop it first, or run every server of the "
            "group with --standby: the others wait and take over when it stops)"
        )
    print(
        f"railyard up: standby: {current.owner} is active (epoch {current.epoch}); "
        f"this server takes over when its lease lapses; {api_url} answers 503 until then",
        flush=True,
    )
    serve_standby(sock, lease)
    return lease


def advertised(api_url: str) -> str:
    """The URL other servers name to clients: the host name for a wildcard address."""
    for wildcard in ("0.0.0.0", "[::]"):
        if f"//{wildcard}:" in api_url:
            return api_url.replace(wildcard, socket.getfqdn(), 1)
    return api_url


def serve_standby(sock: socket.socket, lease: Lease) -> None:
    """Answer 503 on ``sock`` while waiting for the lease; return once it is ours or on
    SIGTERM/SIGINT. uvicorn closes the sockets it served, so it gets a duplicate: the
    listening socket, and connections waiting in its backlog, pass to the active server."""
    app = standby_app(lease)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    stop = threading.Event()

    def watch() -> None:
        if lease.wait_active(stop):
            server.should_exit = True

    watcher = threading.Thread(target=watch, name="railyard-standby", daemon=True)
    watcher.start()
    duplicate = socket.socket(fileno=os.dup(sock.fileno()))
    try:
        server.run(sockets=[duplicate])
    finally:
        stop.set()
        watcher.join()
        duplicate.close()
    if lease.held:
        print(f"railyard up: took over as the active server (epoch {lease.epoch})", flush=True)


def standby_app(lease: Lease) -> Any:
    """An ASGI app answering every request 503, ``Retry-After: 1``, naming the active."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        active = lease.active.url if lease.active is not None else ""
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1013})  # try again later
            return
        if scope["type"] != "http":
            return
        where = f"the active one is {active}" if active else "no server is active yet"
        body = error_body(
            f"this railyard server is a standby; {where}",
            hint="retry there, or list every server in RAILYARD_URL (comma-separated)",
            standby=True,
            active=active or None,
        )
        headers = [(b"content-type", b"application/json"), (b"retry-after", b"1")]
        if active:
            headers.append((ACTIVE_HEADER.lower().encode(), active.encode()))
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    return app
