"""The soak's HTTP client: counts what the server answered, survives a server killed under it.

A request that meets a dead server (refused, reset, timed out) is lost, not retried: the soak
moves on and the store stays the judge of what happened. Every 5xx is kept with its line,
since the API promises none for any input; ``/healthz`` is sampled on its own.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from railyard.client.bounds import MAX_JOBS_LISTED as ALL_JOBS
from tests.integration.server_proc import ServerProcess

ACTIVE = ("pending", "starting", "running", "preempting", "cancelling")


@dataclass
class Tally:
    """What the clients saw: answers by status, lost requests, 5xx and 503 /healthz lines."""

    statuses: Counter[int] = field(default_factory=Counter)
    lost: int = 0
    errors_5xx: list[str] = field(default_factory=list)
    health_failing: Counter[str] = field(default_factory=Counter)
    health_samples: int = 0


class Api:
    def __init__(self, server: ServerProcess, tally: Tally) -> None:
        self.server, self.tally = server, tally
        self._token = ""
        self._http = httpx.Client(timeout=15)

    def close(self) -> None:
        self._http.close()

    def _headers(self, fresh: bool = False) -> dict[str, str]:
        if fresh or not self._token:
            try:
                self._token = self.server.token
            except (OSError, json.JSONDecodeError, KeyError):  # being rewritten by a restart
                self._token = ""
        return {"Authorization": f"Bearer {self._token}"}

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response | None:
        """The response, or None when the server was not there to answer."""
        for fresh in (False, True):
            try:
                response = self._http.request(
                    method, f"{self.server.url}{path}", headers=self._headers(fresh), **kw
                )
            except httpx.TransportError:
                self.tally.lost += 1
                return None
            if response.status_code != 401:
                break
        self.tally.statuses[response.status_code] += 1
        if response.status_code >= 500:
            self.tally.errors_5xx.append(
                f"{method} {path}: {response.status_code} {response.text[:200]}"
            )
        return response

    def json(self, method: str, path: str, **kw: Any) -> Any:
        """The decoded body of a 2xx answer, else None."""
        response = self.call(method, path, **kw)
        if response is None or not response.is_success:
            return None
        return response.json()

    def active_jobs(self) -> list[dict[str, Any]] | None:
        states = "&".join(f"state={s}" for s in ACTIVE)
        found: list[dict[str, Any]] | None = self.json(
            "GET", f"/v1/jobs?{states}&limit={ALL_JOBS}"
        )  # every page
        return found

    def health(self) -> tuple[int, str] | None:
        """``/healthz``'s status and reason; a 503 is counted by its reason."""
        try:
            response = self._http.get(f"{self.server.url}/healthz")
        except httpx.TransportError:
            return None
        self.tally.health_samples += 1
        reason = str(response.json().get("reason") or "")
        if response.status_code != 200:
            self.tally.health_failing[reason.split(":")[0][:80]] += 1
        return response.status_code, reason
