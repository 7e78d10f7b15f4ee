"""A simulation sweep on a local Ray instance (the process pool runs in the main tier:
tests/sim/test_sim_cli.py). A module of its own: it starts a Ray instance, one of the heavy
modules that run one at a time on this machine (tests/conftest.py)."""

from __future__ import annotations

import pytest

from railyard.sim import sweep
from tests.parts import needs

pytestmark = [needs("ray"), pytest.mark.slow, pytest.mark.heavy]


def test_ray_sweep_on_a_local_instance() -> None:
    scenarios = [
        sweep.Scenario("gaggle-h100", "fifo", seed=s, synthetic="philly", jobs=40) for s in (0, 1)
    ]
    import ray

    try:
        results = sweep.sweep(scenarios, ray_address="local")
    finally:
        ray.shutdown()  # the local instance goes with the test, not with this worker
    assert [r["seed"] for r in results] == [0, 1]
