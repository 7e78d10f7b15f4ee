"""The cluster the simulator schedules on: a blueprint's GPU nodes as `sched.Node`s.

With a fabric, each node carries its topology path (scalable unit, leaf group) from
`fabric.tree.topology_tree`, so placement and the "within one leaf group" metric see the real
network. Without one, GPU nodes of compute groups sit in one leaf group.
"""

from __future__ import annotations

from railyard.blueprint import Blueprint, NodeType
from railyard.fabric.build import build_fabric
from railyard.fabric.tree import topology_tree
from railyard.sched import Node, Queue


def _domains(node_type: NodeType) -> tuple[tuple[int, ...], ...]:
    size = node_type.nvlink_domain_gpus
    if size <= 0 or size >= node_type.gpus or node_type.gpus % size:
        return ()
    return tuple(tuple(range(s, s + size)) for s in range(0, node_type.gpus, size))


def cluster_nodes(bp: Blueprint) -> list[Node]:
    """GPU nodes of the blueprint; flavor is the GPU model name (e.g. ``H100-SXM-80GB``)."""
    out: list[Node] = []
    if bp.fabric is not None:
        for tn in topology_tree(build_fabric(bp)).nodes:
            nt = bp.node_types[bp.node_groups[tn.group].node_type]
            if tn.gpus and nt.gpu:
                domains = _domains(nt)
                out.append(
                    Node(
                        tn.name, nt.gpu, tn.gpus, nt.cpu_cores, path=tn.path, nvlink_domains=domains
                    )
                )
        return out
    for group_name, group, nt in bp.fabric_groups():
        if not nt.gpus or not nt.gpu:
            continue
        prefix = group.hostname_prefix or group_name
        width = max(3, len(str(group.count)))
        for i in range(1, group.count + 1):
            out.append(
                Node(
                    f"{prefix}{i:0{width}d}",
                    nt.gpu,
                    nt.gpus,
                    nt.cpu_cores,
                    path=("su0", "su0-lg0"),
                    nvlink_domains=_domains(nt),
                )
            )
    return out


def flat_queues(
    names: list[str],
    weights: dict[str, float] | None = None,
    *,
    priority_preemption: bool = False,
    default_time_s: float | None = None,
    max_time_s: float | None = None,
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
        )
        for n in sorted(names)
    ]
