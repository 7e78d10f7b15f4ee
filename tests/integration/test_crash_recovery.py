"""`kill -9` of the control plane at random moments while short jobs run: after each restart
every job finishes, and each attempt runs exactly once, judged from the jobs' own output (no
job lost, none started twice). On SQLite and PostgreSQL.

The default suite runs a small campaign (bounded in time); ``benchmarks/crash_campaign.py``
runs the long one (1,200 jobs, 40 kills) and records its figures.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.integration.crash_campaign import run_campaign

JOBS = int(os.environ.get("RAILYARD_CRASH_JOBS", "150"))
KILLS = int(os.environ.get("RAILYARD_CRASH_KILLS", "4"))


def test_kill9_at_random_points_runs_every_attempt_once(
    tmp_path: Path, database_url: str | None
) -> None:
    result = run_campaign(tmp_path, database_url, jobs=JOBS, kills=KILLS, seed=11)
    assert result.twice == [], f"attempts run twice: {result.twice[:10]}"
    assert result.lost == [], f"jobs that never ran: {result.lost[:10]}"
    assert dict(result.states) == {"completed": JOBS}, result.summary()
    assert dict(result.restarts) == {0: JOBS}, result.summary()
