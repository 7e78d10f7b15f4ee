"""The cluster the simulator schedules on: the blueprint's nodes through the same adapter as
the live control plane (`railyard.inventory`), and the simulator's default queues."""

from __future__ import annotations

from railyard.inventory import scheduler_nodes
from railyard.sched import Queue

cluster_nodes = scheduler_nodes  # the one inventory adapter (railyard.inventory)


def flat_queues(
    names: list[str],
    weights: dict[str, float] | None = None,
    *,
    priority_preemption: bool = False,
    default_time_s: float | None = None,
    max_time_s: float | None = None,
    idle_limit_s: float | None = None,
) -> list[Queue]:
    """One cohort `cluster` with a leaf per queue name: no nominal quota, so every queue may
    use any idle GPU and fair share (by weight) decides who goes first. The other settings
    apply to every leaf (see `sched.Queue`)."""
    return [Queue("cluster")] + [
        Queue(
            n,
            parent="cluster",
            weight=(weights or {}).get(n, 1.0),
            priority_preemption=priority_preemption,
            default_time_s=default_time_s,
            max_time_s=max_time_s,
            idle_limit_s=idle_limit_s,
        )
        for n in sorted(names)
    ]
