"""kill -9 of `railyard up` at random moments while short jobs run, then restart, until every
job has ended; exactly-once is judged from the jobs' own output (each appends its id and
attempt to one file), not from the store. Used by ``test_crash_recovery.py`` (small) and by
``benchmarks/crash_campaign.py`` (the long campaign)."""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from railyard.client.bounds import MAX_JOBS_LISTED as ALL_JOBS
from tests.integration.server_proc import ServerProcess

BATCH = 500  # jobs per POST /v1/jobs/batch


@dataclass
class CampaignResult:
    jobs: int
    kills: int
    wall_s: float
    states: Counter[str] = field(default_factory=Counter)
    ids: list[str] = field(default_factory=list)
    runs: Counter[tuple[str, str]] = field(default_factory=Counter)  # (id, attempt) -> lines
    restarts: Counter[int] = field(default_factory=Counter)  # restart_count -> jobs

    @property
    def lost(self) -> list[str]:
        """Jobs that never ran (no line in the output)."""
        ran = {job_id for job_id, _ in self.runs}
        return sorted(set(self.ids) - ran)

    @property
    def twice(self) -> list[tuple[str, str]]:
        """(job, attempt) pairs that ran more than once: what must never happen."""
        return sorted(pair for pair, n in self.runs.items() if n > 1)

    @property
    def rerun(self) -> list[str]:
        """Jobs that ran in more than one attempt (a requeue, by the restart policy)."""
        attempts = Counter(job_id for job_id, _ in self.runs)
        return sorted(j for j, n in attempts.items() if n > 1)

    def summary(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "kills": self.kills,
            "jobs_lost": len(self.lost),
            "attempts_run_twice": len(self.twice),
            "jobs_rerun_by_restart_policy": len(self.rerun),
            "states": dict(self.states),
            "restart_counts": dict(self.restarts),
            "wall_s": round(self.wall_s, 1),
        }


def run_campaign(
    state_dir: Path,
    database_url: str | None,
    *,
    jobs: int,
    kills: int,
    seed: int,
    job_s: float = 0.2,
    timeout_s: float = 600.0,
) -> CampaignResult:
    """Submit ``jobs`` jobs of ``job_s`` seconds, kill -9 the server ``kills`` times at random
    moments (seeded) while they run, and restart it each time; return what happened."""
    rng = random.Random(seed)
    out = state_dir / "ran.txt"
    command = [
        "sh",
        "-c",
        f'echo "$RAILYARD_JOB_ID $RAILYARD_RESTART_COUNT" >> {out}; sleep {job_s}',
    ]
    server = ServerProcess(state_dir, gpus=8, database_url=database_url)
    began = time.monotonic()
    server.start()
    try:
        ids: list[str] = []
        for first in range(0, jobs, BATCH):
            batch = {"jobs": [{"command": command}] * min(BATCH, jobs - first)}
            ids += [j["id"] for j in server.request("POST", "/v1/jobs/batch", json=batch)]
        done = 0
        for _ in range(kills):
            time.sleep(rng.uniform(0.05, 1.5))  # a random point of the loop's work
            server.kill9()
            server.start(timeout_s=90)  # it adopts what runs: slower on a loaded machine
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            listed = server.request("GET", "/v1/jobs", params={"limit": ALL_JOBS})
            done = sum(j["state"] in ("completed", "failed", "cancelled") for j in listed)
            if done == len(ids):
                break
            time.sleep(0.3)
        result = CampaignResult(
            jobs=len(ids), kills=kills, wall_s=time.monotonic() - began, ids=ids
        )
        result.states.update(j["state"] for j in listed)
        result.restarts.update(j["restart_count"] for j in listed)
        lines = out.read_text().splitlines() if out.exists() else []
        result.runs.update(tuple(line.split()) for line in lines)  # type: ignore[misc]
        return result
    finally:
        server.stop()
