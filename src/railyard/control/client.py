"""A small typed client of the REST API, used by the CLI and by scripts.

Where the server is: ``RAILYARD_URL`` and ``RAILYARD_TOKEN``, else
``<RAILYARD_HOME or ~/.railyard>/client.json`` = ``{"url": ..., "token": ...}``, which
``railyard up`` writes for its admin (:func:`save_config`). Every refusal is a
:class:`ClientError` carrying the server's one-line ``detail`` and the HTTP status.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from railyard.control import schemas as s
from railyard.control.paths import client_config_path, default_state_dir

M = TypeVar("M", bound=BaseModel)


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
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "token": token}, f)
    return path


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip().splitlines()[0] if response.text.strip() else "no detail"
    detail = body.get("detail") if isinstance(body, dict) else None
    return str(detail) if detail is not None else json.dumps(body)[:200]


class Client:
    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=self.url, headers=headers, transport=transport, timeout=timeout_s
        )

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
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            response = self._http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise ClientError(f"cannot reach railyard at {self.url}: {exc}") from None
        if response.status_code >= 400:
            raise ClientError(_detail(response), response.status_code)
        return response.json()

    def _one(self, model: type[M], method: str, path: str, **kw: Any) -> M:
        return model.model_validate(self._call(method, path, **kw))

    def _many(self, model: type[M], method: str, path: str, **kw: Any) -> list[M]:
        return TypeAdapter(list[model]).validate_python(self._call(method, path, **kw))  # type: ignore[valid-type]

    # -- jobs --------------------------------------------------------------------------------

    def health(self) -> s.Health:
        return self._one(s.Health, "GET", "/healthz")

    def whoami(self) -> s.UserOut:
        return self._one(s.UserOut, "GET", "/v1/whoami")

    def submit(self, spec: s.JobSubmit) -> list[s.JobOut]:
        body = spec.model_dump(exclude_unset=True)
        return self._many(s.JobOut, "POST", "/v1/jobs", json=body)

    def jobs(
        self,
        *,
        states: list[str] | None = None,
        queue: str | None = None,
        user: str | None = None,
    ) -> list[s.JobOut]:
        params: dict[str, Any] = {"state": states or [], "queue": queue, "user": user}
        params = {k: v for k, v in params.items() if v}
        return self._many(s.JobOut, "GET", "/v1/jobs", params=params)

    def job(self, job_id: str) -> s.JobOut:
        return self._one(s.JobOut, "GET", f"/v1/jobs/{job_id}")

    def cancel(self, job_id: str) -> list[s.JobOut]:
        return self._many(s.JobOut, "DELETE", f"/v1/jobs/{job_id}")

    def logs(self, job_id: str, *, rank: int = 0, offset: int = 0) -> s.LogChunk:
        params = {"rank": rank, "offset": offset}
        return self._one(s.LogChunk, "GET", f"/v1/jobs/{job_id}/logs", params=params)

    def follow_logs(self, job_id: str, *, rank: int = 0, poll_s: float = 1.0) -> Iterator[str]:
        """Text as it is written, until the job has finished and the log is read to the end."""
        offset = 0
        while True:
            chunk = self.logs(job_id, rank=rank, offset=offset)
            if chunk.text:
                yield chunk.text
            if chunk.finished:
                return
            if chunk.offset == offset:
                time.sleep(poll_s)
            offset = chunk.offset

    # -- nodes and queues --------------------------------------------------------------------

    def nodes(self) -> list[s.NodeOut]:
        return self._many(s.NodeOut, "GET", "/v1/nodes")

    def drain(self, name: str, reason: str = "") -> s.NodeOut:
        body = s.NodeAction(reason=reason).model_dump()
        return self._one(s.NodeOut, "POST", f"/v1/nodes/{name}/drain", json=body)

    def resume(self, name: str) -> s.NodeOut:
        return self._one(s.NodeOut, "POST", f"/v1/nodes/{name}/resume")

    def queues(self) -> list[s.QueueOut]:
        return self._many(s.QueueOut, "GET", "/v1/queues")

    def create_queue(self, spec: s.QueueCreate) -> s.QueueOut:
        return self._one(s.QueueOut, "POST", "/v1/queues", json=spec.model_dump())

    def update_queue(self, name: str, spec: s.QueueUpdate) -> s.QueueOut:
        body = spec.model_dump(exclude_unset=True)
        return self._one(s.QueueOut, "PATCH", f"/v1/queues/{name}", json=body)

    def add_member(self, queue: str, user: str) -> s.QueueOut:
        body = {"user": user}
        return self._one(s.QueueOut, "POST", f"/v1/queues/{queue}/members", json=body)

    def remove_member(self, queue: str, user: str) -> s.QueueOut:
        return self._one(s.QueueOut, "DELETE", f"/v1/queues/{queue}/members/{user}")

    # -- users and tokens --------------------------------------------------------------------

    def users(self) -> list[s.UserOut]:
        return self._many(s.UserOut, "GET", "/v1/users")

    def create_user(self, name: str, *, is_admin: bool = False) -> s.UserOut:
        body = s.UserCreate(name=name, is_admin=is_admin).model_dump()
        return self._one(s.UserOut, "POST", "/v1/users", json=body)

    def tokens(self) -> list[s.TokenOut]:
        return self._many(s.TokenOut, "GET", "/v1/tokens")

    def create_token(
        self, user: str, label: str = "", *, expires_in_s: float | None = None
    ) -> s.TokenCreated:
        body = s.TokenCreate(user=user, label=label, expires_in_s=expires_in_s).model_dump()
        return self._one(s.TokenCreated, "POST", "/v1/tokens", json=body)

    def revoke_token(self, token_id: int) -> s.TokenOut:
        return self._one(s.TokenOut, "DELETE", f"/v1/tokens/{token_id}")
