"""Checkpoint size and time, failure rate, Young/Daly intervals and goodput on hand-worked cases."""

from __future__ import annotations

import math

import pytest

from railyard.blueprint.models import StorageSystem
from railyard.twin import checkpoint as ck

STORE = StorageSystem(
    capacity_tbyte=1000, read_gbyte_s=200, write_gbyte_s=100, per_client_gbyte_s=10
)


def test_checkpoint_size_per_parameter() -> None:
    assert ck.checkpoint_bytes(176e9) == pytest.approx(176e9 * 14)
    assert ck.checkpoint_bytes(176e9, with_optimizer=False) == pytest.approx(352e9)


def test_bandwidth_is_nodes_times_per_client_capped_by_aggregate() -> None:
    # 4 nodes x 10 GB/s = 40 GB/s; 50 nodes would ask for 500, capped at 100 (write) / 200 (read)
    assert ck.write_time_s(400e9, STORE, 4) == pytest.approx(10.0)
    assert ck.write_time_s(400e9, STORE, 50) == pytest.approx(4.0)
    assert ck.restore_time_s(400e9, STORE, 50) == pytest.approx(2.0)


def test_failure_rate_from_llama3() -> None:
    per_gpu_hour = 419 / (54 * 24 * 16384)
    rate = ck.FAILURES_PER_GPU_HOUR
    assert rate == pytest.approx(per_gpu_hour)
    assert ck.mtbf_s(16384) / 3600 == pytest.approx(54 * 24 / 419)
    assert ck.mtbf_s(1024) == pytest.approx(16 * ck.mtbf_s(16384))


def test_young_interval() -> None:
    assert ck.young_interval_s(60.0, 3600.0) == pytest.approx(math.sqrt(2 * 60 * 3600))


def test_daly_interval() -> None:
    c, m = 60.0, 3600.0
    x = c / (2 * m)
    expected = math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c
    assert ck.daly_interval_s(c, m) == pytest.approx(expected)
    assert ck.daly_interval_s(c, m) < ck.young_interval_s(c, m)
    assert ck.daly_interval_s(8000.0, 3600.0) == 3600.0  # checkpoint longer than 2 MTBF


def test_goodput_hand_case() -> None:
    # 1,000 GPUs: lambda = 1000 x rate; tau = 600 s, C = 30 s, R = 300 s
    g = ck.goodput(1000, 86400.0, 30.0, 300.0, interval_s=600.0)
    lam = 1000 * ck.FAILURES_PER_GPU_HOUR / 3600
    assert g.checkpointing == pytest.approx(30 / 630)
    assert g.rework == pytest.approx(lam * 315)
    assert g.restarts == pytest.approx(lam * 300)
    assert g.useful == pytest.approx(1 - 30 / 630 - lam * 615)
    assert g.failures == pytest.approx(lam * 86400 / g.useful)


def test_goodput_falls_with_job_size_and_checkpoint_cost() -> None:
    sizes = [ck.goodput(n, 1e6, 60.0, 600.0).useful for n in (512, 4096, 16384, 65536)]
    assert sizes == sorted(sizes, reverse=True)
    costs = [ck.goodput(4096, 1e6, c, 600.0).useful for c in (10.0, 60.0, 300.0)]
    assert costs == sorted(costs, reverse=True)
    assert all(0.0 < u < 1.0 for u in sizes + costs)


def test_young_interval_is_near_the_best() -> None:
    tau = ck.young_interval_s(60.0, ck.mtbf_s(16384))
    best = ck.goodput(16384, 1e6, 60.0, 600.0).useful
    for factor in (0.25, 0.5, 2.0, 4.0):
        assert ck.goodput(16384, 1e6, 60.0, 600.0, interval_s=factor * tau).useful < best


def test_goodput_never_negative() -> None:
    g = ck.goodput(10_000_000, 1e6, 3600.0, 3600.0)
    assert g.useful == 0.0
    assert math.isinf(g.wall_time_factor)
