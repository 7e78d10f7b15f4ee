"""Cancel an array of trivial tasks while it runs, on a real server: completions race the
cancel, and no task may be left ``cancelling`` with its GPUs held. SQLite and PostgreSQL.

``RAILYARD_CANCEL_TASKS`` makes the array larger (the issue's campaign used 10,000).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from railyard.client.bounds import MAX_JOBS_LISTED as ALL_JOBS
from tests.integration.server_proc import ServerProcess

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier

TASKS = int(os.environ.get("RAILYARD_CANCEL_TASKS", "2000"))
HOLDING = {"starting", "running", "preempting", "cancelling"}


def test_cancel_array_while_it_runs_frees_every_gpu(
    tmp_path: Path, database_url: str | None
) -> None:
    server = ServerProcess(tmp_path, gpus=8, database_url=database_url)
    server.start()
    try:
        [first, *_] = server.request(
            "POST", "/v1/jobs", json={"command": ["true"], "gpus": 1, "array": f"0-{TASKS - 1}"}
        )
        parent = first["array_parent"]

        def states() -> Counter[str]:
            listed = server.request("GET", "/v1/jobs", params={"limit": ALL_JOBS})
            return Counter(j["state"] for j in listed)

        deadline = time.monotonic() + 60
        while states()["completed"] < 24 and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(5):  # scancel, again and again, while tasks keep completing
            server.request("DELETE", f"/v1/jobs/{parent}")
            time.sleep(0.05)
        deadline = time.monotonic() + 60
        while HOLDING & set(states()) and time.monotonic() < deadline:
            time.sleep(0.2)
        final = states()
        assert not HOLDING & set(final), final
        assert set(final) <= {"completed", "cancelled"}, final
        assert sum(final.values()) == TASKS
        assert final["cancelled"] > 0
        assert [n["gpus_used"] for n in server.request("GET", "/v1/nodes")] == [0]
    finally:
        server.stop()
