"""A small client of the REST API, used by the CLI and by scripts.

Where the server is: ``RAILYARD_URL`` and ``RAILYARD_TOKEN``, else
``<RAILYARD_HOME or ~/.railyard>/client.json`` = ``{"url": ..., "token": ...}``, which
``railyard up`` writes for its admin (:func:`save_config`). Every refusal is a
:class:`ClientError` carrying the server's one-line ``detail`` and the HTTP status.

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
from railyard.client.config import client_config_path, default_state_dir
from railyard.client.transport import Connection

IDEMPOTENT = ("GET", "DELETE", "PUT")
IDLE_RECONNECT_S = 4.0  # under uvicorn's 5 s keep-alive: never reuse a socket it may close


if TYPE_CHECKING:
    from railyard.client.websocket import WebSocket


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


class Client:
    def __init__(self, url: str, token: str | None, *, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ClientError(f"bad server URL {url!r} (hint: e.g. http://127.0.0.1:8765)")
        try:
            port = parts.port
        except ValueError:
            raise ClientError(f"bad server URL {url!r}: the port is not a number") from None
        self._conn = Connection(parts.scheme, parts.hostname, port, timeout_s)
        self._prefix = parts.path.rstrip("/")
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._last_used = 0.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        url, token = env.get("RAILYARD_URL"), env.get("RAILYARD_TOKEN")
        path = config_path(env)
        if (not url or not token) and path.is_file():
            try:
                saved = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise ClientError(f"cannot read {path}: {exc}") from None
            url, token = url or saved.get("url"), token or saved.get("token")
        if not url:
            raise ClientError(
                "no railyard server configured: set RAILYARD_URL and RAILYARD_TOKEN, "
                f"or run `railyard up` (it writes {path})"
            )
        return cls(url, token)

    def close(self) -> None:
        self._conn.close()

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
        target = self._prefix + path + (f"?{urlencode(query, doseq=True)}" if query else "")
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            if self._conn.open and time.monotonic() - self._last_used > IDLE_RECONNECT_S:
                self._conn.close()
            reused = self._conn.open
            try:
                response = self._conn.request(method, target, headers, data)
            except OSError as exc:
                self._conn.close()
                # A kept-alive socket the server closed meanwhile: retry once on a new one,
                # when repeating the request cannot do anything twice.
                if attempt == 0 and reused and method in IDEMPOTENT:
                    continue
                raise ClientError(f"cannot reach railyard at {self.url}: {exc}") from None
            self._last_used = time.monotonic()
            if response.status >= 400:
                raise ClientError(_detail(response.status, response.body), response.status)
            try:
                return json.loads(response.body)
            except ValueError:
                raise ClientError(
                    f"railyard at {self.url} answered {response.status} with no JSON"
                ) from None
        raise AssertionError("unreachable")

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
    ) -> list[wire.Job]:
        """Jobs, oldest first. ``finished_within_s`` keeps finished jobs only if they ended
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
        }
        return cast(list[wire.Job], self._call("GET", "/v1/jobs", params=params))

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

    def requeue(self, job_id: str) -> list[wire.Job]:
        """scontrol requeue: stop a running job and queue it again, one restart more."""
        return cast(list[wire.Job], self._call("POST", _path("v1", "jobs", job_id, "requeue")))

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
