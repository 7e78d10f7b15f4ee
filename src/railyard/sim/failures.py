"""Node failures and repairs: exponential inter-arrival per node, seeded, plus injected ones.

The default rate comes from Llama 3 405B pre-training: 419 unexpected interruptions in 54 days
on 16,384 H100 GPUs (Dubey et al. 2024, arXiv 2407.21783, section 3.3.4; perf_reference.csv row
f01), i.e. about 2.0e-5 per GPU-hour, attributed to GPUs so a node of G GPUs fails at G times
that (plus an optional per-node rate for host faults). A node stays down for a repair time
drawn from a lognormal around `repair_median_s` (a few hours by default: reboot, diagnostics,
often a part swap), then comes back and its failure clock restarts.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from railyard.twin.checkpoint import FAILURES_PER_GPU_HOUR


@dataclass(frozen=True)
class InjectedFailure:
    """A failure at a known time, for what-ifs and tests."""

    t_s: float
    node: str
    repair_s: float = 4 * 3600.0


@dataclass(frozen=True)
class FailureModel:
    """Failure rates and repair times. `random_failures=False` keeps only injected ones."""

    per_gpu_hour: float = FAILURES_PER_GPU_HOUR
    per_node_hour: float = 0.0
    repair_median_s: float = 4 * 3600.0
    repair_sigma: float = 0.5  # lognormal shape; 0 gives a fixed repair time
    random_failures: bool = True
    injected: tuple[InjectedFailure, ...] = ()

    def __post_init__(self) -> None:
        if min(self.per_gpu_hour, self.per_node_hour, self.repair_sigma) < 0:
            raise ValueError("failure rates and repair_sigma must be >= 0")
        if self.repair_median_s <= 0:
            raise ValueError("repair_median_s must be > 0")

    def node_rate_per_s(self, gpus: int) -> float:
        return (gpus * self.per_gpu_hour + self.per_node_hour) / 3600.0


class FailureProcess:
    """Draws failure and repair times for named nodes from one seeded generator."""

    def __init__(self, model: FailureModel, nodes: Sequence[tuple[str, int]], seed: int) -> None:
        self.model = model
        self.gpus = dict(nodes)
        self._rng = random.Random(seed)

    def next_failure_t_s(self, node: str, after_t_s: float) -> float:
        """When `node` fails next, if it is up from `after_t_s` (inf if it never does)."""
        rate = self.model.node_rate_per_s(self.gpus[node])
        if not self.model.random_failures or rate <= 0:
            return math.inf
        return after_t_s + self._rng.expovariate(rate)

    def repair_s(self) -> float:
        m = self.model
        if m.repair_sigma == 0:
            return m.repair_median_s
        return m.repair_median_s * math.exp(self._rng.gauss(0.0, m.repair_sigma))
