"""A live `railyard up` accounts the cores its machine declares: two CPU jobs that each ask
more than half of them run one after the other (the second waits with Slurm's `Resources`),
and a job asking more cores than the machine has is refused at submit."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from tests.integration.server_proc import ServerProcess


def test_two_jobs_that_need_most_of_the_cores_run_one_after_the_other(tmp_path: Path) -> None:
    cores = os.cpu_count() or 1
    server = ServerProcess(tmp_path, gpus=0, cycle_interval_s=0.1)
    server.start()
    try:
        body = {"command": ["sleep", "2"], "cpus_per_task": cores // 2 + 1}
        first = server.request("POST", "/v1/jobs", json=body)[0]["id"]
        second = server.request("POST", "/v1/jobs", json=body)[0]["id"]

        def show(job_id: str) -> dict[str, Any]:
            return dict(server.request("GET", f"/v1/jobs/{job_id}"))

        seen_waiting = False
        deadline = time.monotonic() + 30
        while show(second)["state"] != "completed":
            assert time.monotonic() < deadline, (show(first), show(second))
            a, b = show(first), show(second)
            # "" until a cycle has seen the second job (it may come in after the first started)
            if a["state"] == "running" and b["state"] == "pending" and b["reason"]:
                assert b["reason"] == "Resources"
                seen_waiting = True
            time.sleep(0.1)
        a, b = show(first), show(second)
        assert seen_waiting
        assert a["state"] == "completed"
        assert b["start_t_s"] >= a["end_t_s"]

        too_many = server.call("POST", "/v1/jobs", json={**body, "cpus_per_task": cores + 1})
        assert too_many.status_code == 422
        assert too_many.json()["detail"].startswith(
            f"cpus_per_task: a worker needs {cores + 1} cores on one node (--cpus-per-task "
        )
        assert too_many.json()["detail"].count(f"has {cores} (hint:") == 1
    finally:
        server.stop()
