"""``GET /v1/jobs`` answers a page by default and links the next (issue 60: 30,400 jobs in
one answer took 3.6-14 s), on both stores: without ``limit`` a full page of `JOBS_PAGE`
carries ``Link: <...after=ID>; rel="next"`` and ``X-Next-Cursor``, the next page picks up
after that id (array tasks in their order), the last page has no link; a bad cursor is a
one-line 422. The CLI's ``queue`` (through `Client.jobs`) and ``history`` page through all,
against a real uvicorn server."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert, select
from tests.control.conftest import FLAVOR
from tests.control.test_cli_client import Cli, cli, server  # noqa: F401 (fixtures)

from railyard.client.bounds import JOBS_PAGE
from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, User

pytestmark = pytest.mark.stores
EXTRA = 205


def _seed(store: Store) -> list[str]:
    """JOBS_PAGE + EXTRA of alice's jobs: plain ones, and an array of 10 tasks across the
    page's edge."""
    now = time.time()
    with store.session() as session:
        alice = session.scalars(select(User).where(User.name == "alice")).one()
        rows, ids = [], []
        for n in range(1, JOBS_PAGE + EXTRA - 8):
            tasks = range(10) if n == JOBS_PAGE - 4 else [None]
            for t in tasks:
                job_id = f"{n}_{t}" if t is not None else str(n)
                ids.append(job_id)
                rows.append({"id": job_id, "number": n, "array_index": t,
                             "array_parent": str(n) if t is not None else None,
                             "user_id": alice.id, "queue": "default", "command": ["true"],
                             "flavor": FLAVOR, "state": "completed", "submit_t_s": now - 60,
                             "start_t_s": now - 50, "end_t_s": now - 40,
                             "updated_t_s": now})  # fmt: skip
        session.execute(insert(JobRow), rows)
    return ids


def test_jobs_come_a_page_at_a_time(store: Store, tmp_path: object,
                                    tokens: dict[str, str]) -> None:  # fmt: skip
    ids = _seed(store)
    assert len(ids) == JOBS_PAGE + EXTRA
    api = TestClient(create_app(store, wake=lambda: None, state_dir=tmp_path),  # type: ignore[arg-type]
                     headers={"Authorization": f"Bearer {tokens['alice']}"})  # fmt: skip
    first = api.get("/v1/jobs", params={"state": "completed"})
    assert first.status_code == 200
    got = [j["id"] for j in first.json()]
    assert got == ids[:JOBS_PAGE]
    cursor = first.headers["x-next-cursor"]
    assert cursor == ids[JOBS_PAGE - 1]
    assert first.headers["link"] == f'</v1/jobs?state=completed&after={cursor}>; rel="next"'
    second = api.get("/v1/jobs", params={"state": "completed", "after": cursor})
    assert [j["id"] for j in second.json()] == ids[JOBS_PAGE:]
    assert "link" not in second.headers
    small = api.get("/v1/jobs", params={"limit": 3, "after": ids[JOBS_PAGE - 6]})
    assert [j["id"] for j in small.json()] == ids[JOBS_PAGE - 5 : JOBS_PAGE - 2]
    bad = api.get("/v1/jobs", params={"after": "x'--"})
    assert bad.status_code == 422
    assert "after" in bad.text


def test_the_cli_pages_through(store: Store, cli: Cli) -> None:  # noqa: F811
    ids = _seed(store)
    queue = cli.json("alice", "queue", "--state", "all", "--array")
    assert [j["id"] for j in queue] == ids
    history = cli.json("alice", "history", "--starttime", "now-1hour")
    assert [j["id"] for j in history] == ids
