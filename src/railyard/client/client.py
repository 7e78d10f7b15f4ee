"""A small client of the REST API, used by the CLI and by scripts.

Where the server is: ``RAILYARD_URL`` and ``RAILYARD_TOKEN``, else
``<RAILYARD_HOME or ~/.railyard>/client.json`` = ``{"url": ..., "token": ...}``, which
``railyard login`` writes for a user and ``railyard up`` for its admin (:func:`save_config`);
:func:`railyard.client.config.resolve_server` decides. Every refusal is a
:class:`ClientError` carrying the server's one-line ``detail`` and the HTTP status.

The URL may be a comma-separated list: the servers of one high-availability group
(`control.process.standby`). The client stays with the one that last answered; it moves on to the
next when one cannot be reached (refused before anything was sent, or for a request that
may be repeated, cut short) or answers 503 (a standby, a server stepping down, a store
restarting: nothing was committed), going to the active a standby names first, and tries
the list again every ``Retry-After`` for up to ``FAILOVER_S``: a takeover takes seconds.

It speaks HTTP/1.1 over one keep-alive socket (:mod:`railyard.client.transport`) and returns
the server's JSON as the typed dicts of :mod:`railyard.client.wire`: a CLI call must answer
in milliseconds, and httpx plus pydantic cost more to import than the request takes
(``benchmarks/bench_cli.py``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, cast
from urllib.parse import quote, urlencode, urlsplit

from railyard.client import wire
from railyard.client.bounds import JOBS_PAGE
from railyard.client.config import (
    LOGIN_HINT,
    ConfigError,
    client_config_path,
    default_state_dir,
    resolve_server,
)
from railyard.client.transport import Connection

IDEMPOTENT = ("GET", "DELETE", "PUT")
IDLE_RECONNECT_S = 4.0  # under uvicorn's 5 s keep-alive: never reuse a socket it may close
FAILOVER_S = 30.0  # with several servers: how long to look for an active one
FAILOVER_PAUSE_S = 1.0  # between two rounds of the list (the standby's Retry-After)


if TYPE_CHECKING:
    from railyard.client.websocket import WebSocket


class _Unreached(Exception):
    """No answer from one server, and asking another cannot do anything twice."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.error = ClientError(line)


class ClientError(Exception):
    """A request that failed; ``status`` is None when the server could not be reached."""

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    return client_config_path(default_state_dir(environ))


def save_config(url: str, token: str, path: Path | None = None) -> Path:
    """Write the client config readable by its owner only (it holds a bearer token)."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file may have been created with a looser mode
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "token": token}, f)
    return path


def _detail(status: int, body: bytes) -> str:
    """The server's one-line ``detail``, or the first line of whatever it sent."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text.splitlines()[0] if text else f"HTTP {status}"
    detail = data.get("detail") if isinstance(data, dict) else None
    return str(detail) if detail is not None else json.dumps(data)[:200]


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") for p in parts)


def _active_named(body: bytes) -> str | None:
    """The active server a standby's 503 names (``"active"``), if any."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    active = data.get("active") if isinstance(data, dict) else None
    return active.rstrip("/") if isinstance(active, str) and active else None


class _Server:
    """One server of the list: its URL, path prefix and keep-alive connection."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ClientError(f"bad server URL {url!r} (hint: e.g. http://127.0.0.1:8765)")
        try:
            port = parts.port
        except ValueError:
            raise ClientError(f"bad server URL {url!r}: the port is not a number") from None
        self.conn = Connection(parts.scheme, parts.hostname, port, timeout_s)
        self.prefix = parts.path.rstrip("/")
        self.last_used = 0.0


class Client:
    def __init__(self, url: str, token: str | None, *, timeout_s: float = 30.0) -> None:
        urls = [u.strip() for u in url.split(",") if u.strip()] or [url]
        self._timeout_s = timeout_s
        self._servers = [_Server(u, timeout_s) for u in urls]
        self._at = 0  # the server that answered last
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    @property
    def url(self) -> str:
        """The server in use: the one that answered last."""
        return self._servers[self._at].url

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        try:
            server = resolve_server(environ)
        except ConfigError as exc:
            raise ClientError(str(exc)) from None
        if not server.url:
            raise ClientError(f"no railyard server configured (hint: {LOGIN_HINT})")
        return cls(server.url, server.token)

    def close(self) -> None:
        for server in self._servers:
            server.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- transport ----------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None and v != []}
        target = path + (f"?{urlencode(query, doseq=True)}" if query else "")
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if len(self._servers) > 1:
            return self._fail_over(method, target, headers, data)
        only = self._servers[0]
        try:
            response = self._send(only, method, target, headers, data)
        except _Unreached as exc:
            raise exc.error from None
        return self._answer(only, response)

    def _fail_over(
        self, method: str, target: str, headers: dict[str, str], data: bytes | None
    ) -> Any:
        """Ask the servers in turn, from the one that answered last, until one is active."""
        deadline = time.monotonic() + FAILOVER_S
        while True:
            error: ClientError | None = None
            order = self._servers[self._at :] + self._servers[: self._at]
            while order:
                server = order.pop(0)
                try:
                    response = self._send(server, method, target, headers, data)
                except _Unreached as exc:
                    error = exc.error
                    continue
                except ClientError as exc:  # cut short after the request went: not repeated
                    raise exc from None
                if response.status == 503:
                    error = ClientError(_detail(503, response.body), 503)
                    named = _active_named(response.body)
                    if named is not None:
                        self._learn(named, order)
                    continue
                self._at = self._servers.index(server)
                return self._answer(server, response)
            if time.monotonic() + FAILOVER_PAUSE_S > deadline:
                assert error is not None
                raise error
            time.sleep(FAILOVER_PAUSE_S)

    def _learn(self, url: str, order: list[_Server]) -> None:
        """Try the active a standby named next (added to the list when it was not in it)."""
        known = next((s for s in self._servers if s.url == url), None)
        if known is None:
            try:
                known = _Server(url, self._timeout_s)
            except ClientError:
                return
            self._servers.append(known)
        if known in order:
            order.remove(known)
        order.insert(0, known)

    def _send(
        self, server: _Server, method: str, target: str, headers: dict[str, str],
        data: bytes | None,
    ) -> Any:  # fmt: skip
        """One request to ``server``; :class:`_Unreached` when nothing reached it (a refused
        connection) or a repeatable request was cut short, so another server may be asked."""
        conn = server.conn
        for attempt in (0, 1):
            idle_s = time.monotonic() - server.last_used
            if conn.open and (idle_s > IDLE_RECONNECT_S or conn.dropped()):
                conn.close()
            reused = conn.open
            try:
                if not conn.open:
                    conn.connect()
            except OSError as exc:
                conn.close()
                raise _Unreached(f"cannot reach railyard at {server.url}: {exc}") from None
            try:
                response = conn.request(method, server.prefix + target, headers, data)
            except OSError as exc:
                conn.close()
                # A kept-alive socket the server closed meanwhile: retry once on a new one,
                # when repeating the request cannot do anything twice.
                if attempt == 0 and reused and method in IDEMPOTENT:
                    continue
                line = f"cannot reach railyard at {server.url}: {exc}"
                if method in IDEMPOTENT:
                    raise _Unreached(line) from None
                raise ClientError(line) from None
            server.last_used = time.monotonic()
            return response
        raise AssertionError("unreachable")

    def _answer(self, server: _Server, response: Any) -> Any:
        if response.status >= 400:
            raise ClientError(_detail(response.status, response.body), response.status)
        try:
            return json.loads(response.body)
        except ValueError:
            raise ClientError(
                f"railyard at {server.url} answered {response.status} with no JSON"
            ) from None

    # -- jobs ---------------------------------------------------------------------------------

    def health(self) -> wire.Health:
        return cast(wire.Health, self._call("GET", "/healthz"))

    def whoami(self) -> wire.User:
        return cast(wire.User, self._call("GET", "/v1/whoami"))

    def submit(self, spec: Mapping[str, Any]) -> list[wire.Job]:
        """One job or an array (``POST /v1/jobs``); the server checks ``spec``."""
        return cast(list[wire.Job], self._call("POST", "/v1/jobs", body=dict(spec)))

    def jobs(
        self,
        *,
        states: list[str] | None = None,
        queue: str | None = None,
        user: str | None = None,
        array: str | None = None,
        finished_within_s: float | None = None,
        since_t_s: float | None = None,
        until_t_s: float | None = None,
        limit: int | None = None,
        offset: int | None = None,
        after: str | None = None,
    ) -> list[wire.Job]:
        """Jobs, oldest first (after the job ``after``, when given); all of them without
        ``limit`` (page after page). ``finished_within_s`` keeps finished jobs only if they ended
        that recently (squeue's MinJobAge); ``since_t_s``/``until_t_s`` keep jobs that were
        waiting or running at some time in that window (sacct's ``-S``/``-E``)."""
        params = {
            "state": states or [],
            "queue": queue,
            "user": user,
            "array": array,
            "finished_within_s": finished_within_s,
            "since": since_t_s,
            "until": until_t_s,
            "limit": limit,
            "offset": offset,
            "after": after,
        }
        if limit is not None:
            return cast(list[wire.Job], self._call("GET", "/v1/jobs", params=params))
        # the server answers a page at a time (JOBS_PAGE): follow each full page's last id
        out: list[wire.Job] = []
        while True:
            asked = {**params, "limit": JOBS_PAGE}
            page = cast(list[wire.Job], self._call("GET", "/v1/jobs", params=asked))
            out += page
            if len(page) < JOBS_PAGE:
                return out
            params = {**params, "offset": None, "after": page[-1]["id"]}

    def job(self, job_id: str) -> wire.Job:
        return cast(wire.Job, self._call("GET", _path("v1", "jobs", job_id)))

    def job_events(self, job_id: str) -> list[wire.Event]:
        return cast(list[wire.Event], self._call("GET", _path("v1", "jobs", job_id, "events")))

    def terminal(
        self, job_id: str, attach_rank: int | None = None, *, pty: bool = True
    ) -> WebSocket:
        """A WebSocket to an interactive job's terminal (``railyard run``), or with
        ``attach_rank`` to a new shell in that rank of a running job (``railyard attach``)."""
        from railyard.client.websocket import WebSocket

        if attach_rank is None:
            url = f"{self.url}{_path('v1', 'jobs', job_id, 'terminal')}"
        else:
            url = f"{self.url}{_path('v1', 'jobs', job_id, 'attach')}?rank={attach_rank}"
            url += "" if pty else "&pty=false"
        auth = {k: v for k, v in self._headers.items() if k == "Authorization"}
        return WebSocket.connect(url, auth)

    def ssh(self, job_id: str, rank: int = 0) -> WebSocket:
        """A WebSocket carrying one SSH connection to ``sshd -i`` in that rank of a running
        job of yours (``railyard proxy``, an OpenSSH ``ProxyCommand``)."""
        from railyard.client.websocket import WebSocket

        url = f"{self.url}{_path('v1', 'jobs', job_id, 'ssh')}?rank={rank}"
        auth = {k: v for k, v in self._headers.items() if k == "Authorization"}
        return WebSocket.connect(url, auth)

    def cancel(self, job_id: str) -> list[wire.Job]:
        return cast(list[wire.Job], self._call("DELETE", _path("v1", "jobs", job_id)))

    def update(self, job_id: str, change: dict[str, Any]) -> list[wire.Job]:
        """``scontrol update`` of a pending job: ``time``, ``priority``, ``dependency``."""
        return cast(list[wire.Job], self._call("PATCH", _path("v1", "jobs", job_id), body=change))

    def cancel_many(self, job_ids: list[str]) -> dict[str, Any]:
        """Cancel these jobs in one transaction: ``{"jobs": [...], "refused": [{"id",
        "status", "detail"}]}``."""
        return cast(dict[str, Any], self._call("POST", "/v1/jobs/cancel", body={"ids": job_ids}))

    def expected_starts(self) -> list[dict[str, Any]]:
        """squeue --start: when the twin expects each of my pending jobs to start."""
        return cast(list[dict[str, Any]], self._call("GET", "/v1/whatif/starts"))

    def test_only(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """sbatch --test-only: when this submission would start; nothing is stored."""
        return cast(dict[str, Any], self._call("POST", "/v1/whatif/submit", body=dict(spec)))

    def signal(self, job_id: str, signal_name: str, *, batch: bool = False) -> list[wire.Job]:
        """scancel --signal: the loop sends it to the running job's processes (a batch
        script's steps; with ``batch``, scancel --batch, its shell alone), once."""
        path = _path("v1", "jobs", job_id, "signal")
        body: dict[str, object] = {"signal": signal_name}
        if batch:
            body["batch"] = True
        return cast(list[wire.Job], self._call("POST", path, body=body))

    def hold(self, job_id: str) -> list[wire.Job]:
        """Keep a pending job (or every pending task of an array) from starting."""
        return cast(list[wire.Job], self._call("POST", _path("v1", "jobs", job_id, "hold")))

    def requeue(self, job_id: str, *, hold: bool = False) -> list[wire.Job]:
        """scontrol requeue: stop a running job and queue it again, one restart more (held,
        with ``hold``: scontrol requeuehold)."""
        path = _path("v1", "jobs", job_id, "requeue")
        return cast(
            list[wire.Job], self._call("POST", path, params={"hold": "true"} if hold else None)
        )

    def release(self, job_id: str) -> list[wire.Job]:
        return cast(list[wire.Job], self._call("POST", _path("v1", "jobs", job_id, "release")))

    def logs(self, job_id: str, *, rank: int = 0, offset: int = 0) -> wire.LogChunk:
        params = {"rank": rank, "offset": offset}
        path = _path("v1", "jobs", job_id, "logs")
        return cast(wire.LogChunk, self._call("GET", path, params=params))

    def follow_logs(self, job_id: str, *, rank: int = 0, poll_s: float = 1.0) -> Iterator[str]:
        """Text as it is written, until the job has finished and the log is read to the end."""
        offset = 0
        while True:
            chunk = self.logs(job_id, rank=rank, offset=offset)
            if chunk["text"]:
                yield chunk["text"]
            if chunk["finished"]:
                return
            if chunk["offset"] == offset:
                time.sleep(poll_s)
            offset = chunk["offset"]

    # -- nodes and queues ---------------------------------------------------------------------

    def report(
        self,
        *,
        start_t_s: float,
        end_t_s: float | None = None,
        period: str = "total",
        by: list[str] | None = None,
        user: str | None = None,
    ) -> wire.Report:
        """GPU-hours per period and group (sreport)."""
        params = {"start": start_t_s, "end": end_t_s, "period": period, "by": by or ["user"],
                  "user": user}  # fmt: skip
        return cast(wire.Report, self._call("GET", "/v1/report", params=params))

    def samples(self, job_id: str, *, points: int = 300) -> wire.Samples:
        """The job's resource history, at most ``points`` buckets."""
        path = _path("v1", "jobs", job_id, "samples")
        return cast(wire.Samples, self._call("GET", path, params={"points": points}))

    def nodes(self) -> list[wire.Node]:
        return cast(list[wire.Node], self._call("GET", "/v1/nodes"))

    def drain(self, name: str, reason: str = "") -> wire.Node:
        path = _path("v1", "nodes", name, "drain")
        return cast(wire.Node, self._call("POST", path, body={"reason": reason}))

    def resume(self, name: str) -> wire.Node:
        return cast(wire.Node, self._call("POST", _path("v1", "nodes", name, "resume")))

    def report_health(self, name: str, results: Sequence[Mapping[str, Any]]) -> wire.HealthReport:
        path = _path("v1", "nodes", name, "health")
        return cast(wire.HealthReport, self._call("POST", path, body={"results": list(results)}))

    def health_history(self, name: str, limit: int = 20) -> list[wire.HealthRun]:
        path = _path("v1", "nodes", name, "health")
        return cast(list[wire.HealthRun], self._call("GET", path, params={"limit": limit}))

    def ask_across(self, nodes: Sequence[str]) -> wire.Across:
        body = {"nodes": list(nodes)}
        return cast(wire.Across, self._call("POST", "/v1/health/across", body=body))

    def across(self) -> wire.Across:
        return cast(wire.Across, self._call("GET", "/v1/health/across"))

    def queues(self) -> list[wire.Queue]:
        return cast(list[wire.Queue], self._call("GET", "/v1/queues"))

    def priorities(self) -> wire.Priorities:
        """Pending jobs' ordering factors (sprio)."""
        return cast(wire.Priorities, self._call("GET", "/v1/priorities"))

    def shares(self) -> list[wire.Share]:
        """The fair tree's figures per queue and user (sshare)."""
        return cast(list[wire.Share], self._call("GET", "/v1/shares"))

    def create_queue(self, spec: Mapping[str, Any]) -> wire.Queue:
        return cast(wire.Queue, self._call("POST", "/v1/queues", body=dict(spec)))

    def update_queue(self, name: str, changes: Mapping[str, Any]) -> wire.Queue:
        path = _path("v1", "queues", name)
        return cast(wire.Queue, self._call("PATCH", path, body=dict(changes)))

    def add_member(self, queue: str, user: str) -> wire.Queue:
        path = _path("v1", "queues", queue, "members")
        return cast(wire.Queue, self._call("POST", path, body={"user": user}))

    def remove_member(self, queue: str, user: str) -> wire.Queue:
        path = _path("v1", "queues", queue, "members", user)
        return cast(wire.Queue, self._call("DELETE", path))

    # -- users and tokens ---------------------------------------------------------------------

    def users(self) -> list[wire.User]:
        return cast(list[wire.User], self._call("GET", "/v1/users"))

    def create_user(
        self, name: str, *, is_admin: bool = False, unix_user: str | None = None
    ) -> wire.User:
        body: dict[str, Any] = {"name": name, "is_admin": is_admin}
        if unix_user is not None:
            body["unix_user"] = unix_user
        return cast(wire.User, self._call("POST", "/v1/users", body=body))

    def update_user(self, name: str, changes: dict[str, Any]) -> wire.User:
        return cast(wire.User, self._call("PATCH", _path("v1", "users", name), body=changes))

    def delete_user(self, name: str) -> wire.User:
        return cast(wire.User, self._call("DELETE", _path("v1", "users", name)))

    def tokens(self) -> list[wire.Token]:
        return cast(list[wire.Token], self._call("GET", "/v1/tokens"))

    def create_token(
        self, user: str, label: str = "", *, expires_in_s: float | None = None
    ) -> wire.TokenCreated:
        body: dict[str, object] = {"user": user, "label": label}
        if expires_in_s is not None:
            body["expires_in_s"] = expires_in_s
        return cast(wire.TokenCreated, self._call("POST", "/v1/tokens", body=body))

    def revoke_token(self, token_id: int) -> wire.Token:
        return cast(wire.Token, self._call("DELETE", _path("v1", "tokens", str(token_id))))
