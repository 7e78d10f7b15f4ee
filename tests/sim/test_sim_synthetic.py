"""The generator reproduces its published targets (trace_summaries.csv) within tolerances.

Heavy-tailed run times make the sample mean noisy, so the mean gets a wider band than the
median. 40,000 jobs per profile; one seed, so the test is deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest

from railyard.sim.synthetic import generate, philly_runtimes_s, profile
from railyard.sim.workload import FinalState

JOBS = 40_000
MEDIAN_TOL = 0.05  # relative
MEAN_TOL = 0.15  # relative
GPU_MEAN_TOL = 0.08  # relative
STATE_TOL = 0.015  # absolute share


def test_shipped_runtime_sample_is_the_published_file() -> None:
    r = philly_runtimes_s()
    assert r.size == 83_154
    assert np.median(r) == pytest.approx(1186.0)


@pytest.mark.parametrize("name", ["philly", "helios", "kalos", "seren"])
def test_profile_statistics(name: str) -> None:
    p = profile(name)
    w = generate(name, jobs=JOBS, cluster_gpus=1 << 20, seed=7)  # no size capping
    runtime = np.array([j.runtime_s for j in w.jobs])
    gpus = np.array([j.gpus for j in w.jobs])
    assert np.median(runtime) == pytest.approx(p.median_runtime_s, rel=MEDIAN_TOL)
    assert runtime.mean() == pytest.approx(p.mean_runtime_s, rel=MEAN_TOL)
    assert runtime.max() <= p.max_runtime_s
    assert np.median(gpus) == 1
    assert gpus.mean() == pytest.approx(p.mean_gpus, rel=GPU_MEAN_TOL)
    shares = {s: sum(j.state is s for j in w.jobs) / JOBS for s in FinalState}
    total = p.completed + p.cancelled + p.failed
    assert shares[FinalState.COMPLETED] == pytest.approx(p.completed / total, abs=STATE_TOL)
    assert shares[FinalState.CANCELLED] == pytest.approx(p.cancelled / total, abs=STATE_TOL)
    assert shares[FinalState.FAILED] == pytest.approx(p.failed / total, abs=STATE_TOL)


def test_offered_load_and_capping() -> None:
    w = generate("kalos", jobs=2000, cluster_gpus=96, load=0.8, seed=1)
    assert max(j.gpus for j in w.jobs) <= 64  # largest power of two that fits 96 GPUs
    span_s = w.jobs[-1].submit_s
    offered = w.gpu_s() / (96 * span_s)
    assert offered == pytest.approx(0.8, rel=0.05)


def test_max_gpus_cuts_gangs_to_one_node() -> None:
    w = generate("philly", jobs=3000, cluster_gpus=96, seed=1, max_gpus=8)
    assert {j.gpus for j in w.jobs} == {1, 2, 4, 8}
    whole = generate("philly", jobs=3000, cluster_gpus=96, seed=1)
    assert max(j.gpus for j in whole.jobs) > 8  # the cut is the option's, not the profile's
    with pytest.raises(ValueError, match="max_gpus"):
        generate("philly", jobs=10, cluster_gpus=96, max_gpus=0)


def test_gavel_profile_follows_the_papers_generator() -> None:
    """Run times 10^x minutes (x uniform on [1.5, 3] w.p. 0.8, else [3, 4]); sizes 1, 2, 4, 8
    w.p. 0.7, 0.1, 0.15, 0.05; every job completes."""
    w = generate("gavel", jobs=JOBS, cluster_gpus=96, seed=4)
    minutes = np.array([j.runtime_s for j in w.jobs]) / 60
    gpus = np.array([j.gpus for j in w.jobs])
    assert minutes.min() >= 10**1.5 - 1
    assert minutes.max() <= 10**4 + 1
    assert (minutes > 1000).mean() == pytest.approx(0.2, abs=0.01)
    log_short = np.log10(minutes[minutes < 1000])
    assert log_short.mean() == pytest.approx(2.25, abs=0.02)  # uniform on [1.5, 3]
    for size, share in {1: 0.7, 2: 0.1, 4: 0.15, 8: 0.05}.items():
        assert (gpus == size).mean() == pytest.approx(share, abs=0.01)
    assert {j.state for j in w.jobs} == {FinalState.COMPLETED}
    p = profile("gavel")
    assert np.median(minutes * 60) == pytest.approx(p.median_runtime_s, rel=MEDIAN_TOL)
    assert minutes.mean() * 60 == pytest.approx(p.mean_runtime_s, rel=MEAN_TOL)
    assert gpus.mean() == pytest.approx(p.mean_gpus, rel=GPU_MEAN_TOL)


def test_llm_lab_has_large_gangs_and_long_pretraining() -> None:
    w = generate("llm-lab", jobs=5000, cluster_gpus=2048, seed=3)
    gpus = np.array([j.gpus for j in w.jobs])
    runtime = np.array([j.runtime_s for j in w.jobs])
    assert np.median(gpus) == 8
    assert 0.01 < (gpus >= 256).mean() < 0.06
    assert np.median(runtime[gpus >= 256]) > 10 * np.median(runtime[gpus < 256])


def test_walltime_estimates() -> None:
    noisy = generate("philly", jobs=3000, cluster_gpus=96, seed=2)
    assert all(j.walltime_s is not None and j.walltime_s >= j.runtime_s for j in noisy.jobs)
    assert all(j.walltime_s is not None and j.walltime_s % 3600 == 0 for j in noisy.jobs)
    exact = generate("philly", jobs=100, cluster_gpus=96, seed=2, walltime="exact")
    assert all(j.walltime_s == j.runtime_s for j in exact.jobs)


def test_same_seed_same_jobs() -> None:
    a = generate("helios", jobs=500, cluster_gpus=96, seed=5)
    b = generate("helios", jobs=500, cluster_gpus=96, seed=5)
    c = generate("helios", jobs=500, cluster_gpus=96, seed=6)
    assert a.jobs == b.jobs
    assert a.jobs != c.jobs


def test_unknown_profile() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        generate("alibaba", jobs=10, cluster_gpus=8)
