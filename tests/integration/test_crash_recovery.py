"""`kill -9` of the control plane at random moments while short jobs run: after each restart
every job finishes, and each attempt runs exactly once, judged from the jobs' own output (no
job lost, none started twice). On SQLite and PostgreSQL.

The main tier runs a small campaign (40 jobs, 3 kills), the extended tier (``pytest -m slow``)
a longer one (300 jobs, 8 kills); ``benchmarks/crash_campaign.py`` runs the long one (1,200
jobs, 40 kills) and records its figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.crash_campaign import run_campaign
from tests.tiers import tiered

pytestmark = [pytest.mark.stores, pytest.mark.long]  # its PostgreSQL copies stay in the main tier


@tiered("campaign", (40, 3), (300, 8))
def test_kill9_at_random_points_runs_every_attempt_once(
    tmp_path: Path, database_url: str | None, campaign: tuple[int, int]
) -> None:
    jobs, kills = campaign
    result = run_campaign(tmp_path, database_url, jobs=jobs, kills=kills, seed=11)
    assert result.twice == [], f"attempts run twice: {result.twice[:10]}"
    assert result.lost == [], f"jobs that never ran: {result.lost[:10]}"
    assert dict(result.states) == {"completed": jobs}, result.summary()
    assert dict(result.restarts) == {0: jobs}, result.summary()
