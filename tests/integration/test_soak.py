"""The soak's short form, on SQLite and PostgreSQL: the same code as ``benchmarks/soak.py``
(arrays, storms, cancels, holds, drains, time limits, kill -9 of the server) with a small budget:
every job settled exactly once, nothing stuck or left running, ``/healthz`` green and the
store's check clean. ``RAILYARD_SOAK_S`` and ``RAILYARD_SOAK_SEED`` change the budget and the
seed; a failure prints the seed, so ``benchmarks/soak.py --seed`` replays its random choices
(which jobs they hit still depends on the server's timing).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.soak import SoakPlan, run_soak

# Extended tier only: half a minute of one server per store. The main tier keeps the kill -9
# campaign (test_crash_recovery.py) and the cancel races, which cover its faults one by one.
pytestmark = [pytest.mark.long, pytest.mark.slow]

SECONDS = float(os.environ.get("RAILYARD_SOAK_S", "30"))
SEED = int(os.environ.get("RAILYARD_SOAK_SEED", "21"))


def test_soak_settles_every_job_exactly_once(tmp_path: Path, database_url: str | None) -> None:
    plan = SoakPlan(
        seconds=SECONDS,
        seed=SEED,
        kill_every_s=SECONDS / 3,
        min_kills=2,
        storm_every_s=SECONDS,
        settle_s=120,
    )
    result = run_soak(tmp_path, database_url, plan)
    summary = json.dumps(result.summary(), indent=1)
    assert result.clean, f"soak seed {SEED} ({result.store}): {summary}"
    assert result.tally.errors_5xx == [], f"soak seed {SEED}: {summary}"
    assert result.actions["kill"] >= 2, summary
    assert result.actions["storm"] >= 1, summary
