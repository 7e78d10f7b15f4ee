"""The cluster the simulator schedules on: the blueprint's nodes through the same adapter as
the live control plane (`railyard.inventory`), and the simulator's default queues."""

from __future__ import annotations

from railyard.blueprint.catalog import GPUS
from railyard.inventory import scheduler_nodes
from railyard.sched import Node, Queue

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


FLAT_LEAF_GROUP_NODES = 32
"""Nodes per leaf group of a flat cluster (`flat_nodes`): a rail-optimized leaf group's size
in NVIDIA's H100 SuperPOD reference (32 nodes per scalable unit); multi-node gangs prefer one."""


def gpu_flavor(name: str) -> str:
    """The catalog's GPU model a short name means: "H100" -> "H100-SXM-80GB" (the unique
    model whose name starts so, case aside). Raises ValueError with the choices."""
    if name in GPUS:
        return name
    found = [m for m in GPUS if m.lower().startswith(name.lower())] if name else []
    if len(found) != 1:
        many = "names several models" if found else "is no GPU model"
        raise ValueError(f"{name!r} {many} (hint: one of {', '.join(found or GPUS)})")
    return found[0]


def flat_nodes(count: int, gpus_per_node: int, flavor: str) -> list[Node]:
    """`count` alike nodes n0, n1, ... of `gpus_per_node` GPUs of `flavor`, without a
    blueprint (`railyard simulate --nodes N --gpus-per-node G`): leaf groups of
    `FLAT_LEAF_GROUP_NODES` nodes under one scalable unit, one NVLink domain per node, no
    cores or memory counted (jobs asking for none, as the traces do)."""
    if count < 1 or gpus_per_node < 1:
        raise ValueError(f"{count} nodes of {gpus_per_node} GPUs: both must be >= 1")
    return [
        Node(f"n{i}", flavor, gpus_per_node, path=("su0", f"su0-lg{i // FLAT_LEAF_GROUP_NODES}"))
        for i in range(count)
    ]
