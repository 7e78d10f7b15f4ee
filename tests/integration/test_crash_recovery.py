"""`kill -9` of the control plane in the middle of a run: after a restart every job finishes,
and finishes exactly once (no job lost, none started twice). On SQLite and PostgreSQL."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.control.conftest import fresh_pg_database
from tests.integration.server_proc import ServerProcess

JOBS = 6


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    with fresh_pg_database() as url:
        yield url


def _wait(predicate: object, timeout_s: float) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_kill9_restart_every_job_finishes_once(tmp_path: Path, database_url: str | None) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    body = (
        "import os, time; time.sleep(2.0); "
        f"open(os.path.join({str(marks)!r}, os.environ['RAILYARD_JOB_ID']), 'a').write('ran\\n')"
    )
    server = ServerProcess(tmp_path, gpus=4, database_url=database_url)
    server.start()
    try:
        ids = []
        for _ in range(JOBS):
            (job,) = server.request(
                "POST", "/v1/jobs", json={"command": [sys.executable, "-c", body], "gpus": 1}
            )
            ids.append(job["id"])

        def states() -> dict[str, str]:
            return {j["id"]: j["state"] for j in server.request("GET", "/v1/jobs")}

        _wait(lambda: list(states().values()).count("running") >= 2, 30)
        server.kill9()  # mid-run: some running, some pending, nothing settled yet
        time.sleep(0.5)
        server.start()
        _wait(lambda: all(s == "completed" for s in states().values()), 120)
        for job_id in ids:
            assert (marks / job_id).read_text() == "ran\n", f"job {job_id} ran more than once"
        jobs = server.request("GET", "/v1/jobs")
        assert {j["restart_count"] for j in jobs} == {0}
        assert {j["exit_code"] for j in jobs} == {0}
    finally:
        server.stop()
