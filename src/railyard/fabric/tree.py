"""The topology tree the scheduler places jobs on: node -> leaf group -> scalable unit -> fabric.

A leaf group is the set of nodes that share the same leaf switches (a ToR in tor-clos; one leaf
per rail in the rail designs), so any two of its nodes talk through one switch hop on every
rail. A scalable unit is the set of leaf groups joined below the top tier. The scheduler sees
only these labels (``railyard.sched`` does not import this package); drivers hand it
:attr:`TopologyNode.path`.
"""

from __future__ import annotations

from dataclasses import dataclass

from railyard.fabric.model import Fabric

LEVELS = ("fabric", "scalable-unit", "leaf-group", "node")


@dataclass(frozen=True)
class TopologyNode:
    """One node with its labels from the top down, e.g. ``("su2", "su2-lg0")``."""

    name: str
    group: str
    gpus: int
    path: tuple[str, str]

    @property
    def scalable_unit(self) -> str:
        return self.path[0]

    @property
    def leaf_group(self) -> str:
        return self.path[1]


@dataclass(frozen=True)
class TopologyTree:
    """Nodes of one fabric with their labels; children listed in fabric order."""

    fabric: str
    nodes: tuple[TopologyNode, ...]

    def scalable_units(self) -> dict[str, list[str]]:
        """Scalable unit -> its leaf groups, in order."""
        out: dict[str, list[str]] = {}
        for node in self.nodes:
            groups = out.setdefault(node.scalable_unit, [])
            if node.leaf_group not in groups:
                groups.append(node.leaf_group)
        return out

    def leaf_groups(self) -> dict[str, list[str]]:
        """Leaf group -> its node names, in order."""
        out: dict[str, list[str]] = {}
        for node in self.nodes:
            out.setdefault(node.leaf_group, []).append(node.name)
        return out


def topology_tree(fabric: Fabric) -> TopologyTree:
    """Label every fabric node with its scalable unit and leaf group."""
    nodes = tuple(
        TopologyNode(n.name, n.group, n.gpus, (f"su{n.su}", f"su{n.su}-lg{n.leaf_group}"))
        for n in fabric.nodes
    )
    return TopologyTree(fabric.blueprint, nodes)
