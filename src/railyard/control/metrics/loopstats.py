"""What the service loop measures as it runs, for ``/metrics``: how long each scheduling
cycle and each whole step take, and how long jobs waited from submit to their first start.

The histograms belong to one :class:`~railyard.control.loop.service.Loop` and to no registry: the
``/metrics`` collector of that loop's app yields them, so several servers (or test apps) in
one process never share or clash over a metric.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Histogram
from prometheus_client.metrics_core import Metric

# Seconds. A cycle is a few ms on a small cluster and ~60 ms with 10,000 pending jobs
# (benchmarks/bench_sched.py); a step adds the store's reads and writes.
CYCLE_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# From a free GPU taken at once (an event wakes the loop) to jobs queued for a week.
WAIT_BUCKETS_S = (
    0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400, 259200, 604800,
)  # fmt: skip


class LoopMetrics:
    """Histograms the loop observes after each successful step; thread-safe (prometheus
    client metrics lock themselves), written by the loop's thread, read by the API's."""

    def __init__(self) -> None:
        self.cycle = Histogram(
            "railyard_scheduler_cycle_duration_seconds",
            "Time the scheduling decision of one loop step took (sched.lifecycle.step).",
            buckets=CYCLE_BUCKETS_S,
            registry=None,
        )
        self.step = Histogram(
            "railyard_loop_step_duration_seconds",
            "Time one whole loop step took: read the store, decide, write, act.",
            buckets=CYCLE_BUCKETS_S,
            registry=None,
        )
        self.wait = Histogram(
            "railyard_job_submit_to_start_seconds",
            "Time from a job's submission to its first start (restarts are not counted).",
            buckets=WAIT_BUCKETS_S,
            registry=None,
        )

    def observe(self, cycle_s: float, step_s: float, waits_s: Iterable[float]) -> None:
        self.cycle.observe(cycle_s)
        self.step.observe(step_s)
        for wait_s in waits_s:
            self.wait.observe(max(0.0, wait_s))

    def collect(self) -> list[Metric]:
        return [*self.cycle.collect(), *self.step.collect(), *self.wait.collect()]
