"""The ideal slicer of `benchmarks/slicing_bound.py`, the reference the docs hold `las` to
(issue 56: Gavel's LAS on the shipped traces), on jobs small enough to follow by hand."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "slicing_bound.py"
ROUND_S = 360.0


def _bound() -> dict[str, Any]:
    return runpy.run_path(str(SCRIPT), run_name="slicing_bound")


def _jct(key: str, run_rounds: list[int], starve_s: float | None = None) -> list[float]:
    """JCTs in rounds of jobs all submitted at 0, one GPU each, on a pool of one GPU."""
    n = len(run_rounds)
    run_s = np.array(run_rounds, dtype=float) * ROUND_S
    done_s = _bound()["slice_rounds"](
        np.zeros(n), np.ones(n, dtype=int), run_s, run_s, 1, key, starve_s
    )
    return [float(d) / ROUND_S for d in done_s]


def test_srpt_runs_the_shortest_first_and_attained_service_takes_turns() -> None:
    assert _jct("run left (SRPT)", [2, 1]) == [3.0, 1.0]
    # attained service: the first job's round, then the other's (less served), then the first
    assert _jct("attained", [2, 1]) == [3.0, 2.0]


def test_a_starving_job_runs_to_its_end_before_the_shorter_one() -> None:
    # SRPT runs the three short jobs first; with a starvation limit of two rounds the long
    # one has waited that long after the second and runs to its end before the third (both
    # starve then: the tie goes to the earlier job)
    assert _jct("run left (SRPT)", [3, 1, 1, 1]) == [6.0, 1.0, 2.0, 3.0]
    assert _jct("run left (SRPT)", [3, 1, 1, 1], starve_s=2 * ROUND_S) == [5.0, 1.0, 2.0, 6.0]


def test_the_shipped_traces_run_on_one_pool_of_their_gpus() -> None:
    bound = _bound()
    small = {"name": "gavel-b436b2-s0", "nodes": 11, "gpus_per_node": 8}
    mean_h, p99_h = bound["trace_jct_h"](small, "run left (SRPT)", None)
    assert 0 < mean_h < p99_h
