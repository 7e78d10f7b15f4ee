"""Policies compared on the same Philly-profile synthetic trace, as owners would.

Measured (see the report in benchmarks/results and the PR notes): on gaggle-h100 (96 GPUs) a
burst of 400 Philly-shaped jobs (offered load 20x over the arrival window) gives fair share
with EASY backfill a mean JCT about 2% below FIFO's over seeds 0-3 (it loses on one seed).
`fifo` here never holds GPUs for a blocked job, so it is greedy first-fit in arrival order, a
strong baseline for mean JCT; EASY's gain comes from the gangs FIFO lets starve.
"""

from __future__ import annotations

import functools
import statistics

import pytest

from railyard.sim.sweep import Scenario, run_scenario

pytestmark = pytest.mark.long  # few tests, long ones: handed out first (tests/conftest.py)

SEEDS = (0, 1, 2, 3)


@functools.cache
def mean_jct_s(blueprint: str, policy: str, jobs: int, load: float) -> float:
    runs = [
        run_scenario(Scenario(blueprint, policy, seed=s, synthetic="philly", jobs=jobs, load=load))
        for s in SEEDS
    ]
    return statistics.fmean(r["jct"]["mean_s"] for r in runs)


def test_fairshare_easy_beats_fifo_on_gaggle() -> None:
    fifo = mean_jct_s("gaggle-h100", "fifo", 400, 20.0)
    fair = mean_jct_s("gaggle-h100", "fairshare+easy", 400, 20.0)
    assert fair < fifo


def test_easy_beats_fifo_on_gaggle() -> None:
    fifo = mean_jct_s("gaggle-h100", "fifo", 400, 20.0)
    easy = mean_jct_s("gaggle-h100", "easy", 400, 20.0)
    assert easy < fifo


def test_philly_burst_barely_contends_on_rail_2048() -> None:
    """Philly jobs average 1.9 GPUs (at most 128): a few hundred of them never fill 2,048
    GPUs, so both policies start everything at once and tie. Differences at rail-2048 scale
    need weeks of arrivals (see the 100,000-job comparison in the report)."""
    fifo = mean_jct_s("rail-2048", "fifo", 300, 20.0)
    fair = mean_jct_s("rail-2048", "fairshare+easy", 300, 20.0)
    assert fair <= fifo * 1.001
