"""The cluster's nodes as the scheduler sees them, from a blueprint: one adapter for both
drivers (the live control plane and the simulator), so both place jobs on the same topology.

With a fabric, each node carries its topology path (scalable unit, leaf group) from
`fabric.tree.topology_tree`, and its NVLink domains from the node type. Without one, the GPU
nodes of each node group share one leaf group: nothing is known about their network. A node
group in a pool (`blueprint.pools`) has its pool in its flavor; one that is off the compute
fabric (the seed's evaluation nodes) is scheduled too, as a leaf group of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from railyard.blueprint.pools import pooled
from railyard.sched import Node

if TYPE_CHECKING:
    from railyard.blueprint import Blueprint, NodeGroup, NodeType


def nvlink_domains(node_type: NodeType) -> tuple[tuple[int, ...], ...]:
    size = node_type.nvlink_domain_gpus
    if size <= 0 or size >= node_type.gpus or node_type.gpus % size:
        return ()
    return tuple(tuple(range(s, s + size)) for s in range(0, node_type.gpus, size))


def _node(name: str, nt: NodeType, gpus: int, path: tuple[str, ...], group: NodeGroup) -> Node:
    assert nt.gpu is not None
    return Node(
        name,
        pooled(nt.gpu, group.pool),
        gpus,
        cpu_cores=nt.cpu_cores,
        mem_gb=nt.ram_gbyte,
        path=path,
        nvlink_domains=nvlink_domains(nt),
        features=frozenset(group.features),
    )


def scheduler_nodes(bp: Blueprint) -> list[Node]:
    """GPU nodes of the blueprint; flavor is the GPU model name (e.g. ``H100-SXM-80GB``),
    with its pool for a pooled group (``RTX-6000-Ada-48GB@interactive``)."""
    # here, not at the top: `railyard up` without a blueprint (`this_machine`) needs no
    # fabric, and building one brings numpy (~100 ms of the server's start)
    from railyard.fabric.build import build_fabric
    from railyard.fabric.tree import topology_tree

    out: list[Node] = []
    if bp.fabric is not None:
        for tn in topology_tree(build_fabric(bp)).nodes:
            group = bp.node_groups[tn.group]
            nt = bp.node_types[group.node_type]
            if tn.gpus and nt.gpu:
                out.append(_node(tn.name, nt, tn.gpus, tn.path, group))
    else:
        for group_name, group, nt in bp.fabric_groups():
            out += _group_nodes(group_name, group, nt, ("su0", f"{group_name}-lg0"))
    for group_name, group, nt in _pooled_off_fabric(bp):
        out += _group_nodes(group_name, group, nt, (f"{group_name}-su", f"{group_name}-lg0"))
    return out


def _group_nodes(
    group_name: str, group: NodeGroup, nt: NodeType, path: tuple[str, ...]
) -> list[Node]:
    if not nt.gpus or not nt.gpu:
        return []
    prefix = group.hostname_prefix or group_name
    width = max(3, len(str(group.count)))
    return [
        _node(f"{prefix}{i:0{width}d}", nt, nt.gpus, path, group) for i in range(1, group.count + 1)
    ]


def _pooled_off_fabric(bp: Blueprint) -> list[tuple[str, NodeGroup, NodeType]]:
    """GPU groups in a pool but off the compute fabric: scheduled, outside its topology."""
    return [
        (name, group, bp.node_types[group.node_type])
        for name, group in bp.node_groups.items()
        if group.pool and not group.attached()
    ]


def this_machine(name: str, flavor: str, gpus: int, cpu_cores: int, mem_gb: float) -> Node:
    """The one node of `railyard up` without a blueprint: its own leaf group."""
    return Node(name, flavor, gpus, cpu_cores=cpu_cores, mem_gb=mem_gb, path=("su0", "su0-lg0"))
