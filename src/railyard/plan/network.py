"""Network figures computed from the built fabric graph, not from the design's name.

- Bisection: the smallest of a family of cuts between two halves of the nodes (split on the
  scalable-unit or leaf-group boundary nearest the middle), each cut taken at one tier. In a folded
  Clos one of these cuts is the minimum cut, so the figure reflects the links that were actually
  built, including any oversubscription.
- Hops: breadth-first search over the switch graph between representative NIC pairs of each
  class (same leaf group, other leaf group, other rail, other scalable unit). A pair with no
  network path but a shared rail on the same node is reached through PXN (NVLink to the GPU whose
  NIC is on the destination rail; NCCL 2.12+, https://developer.nvidia.com/blog/
  doubling-all2all-performance-with-nvidia-collective-communication-library-2-12/).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from railyard.blueprint.models import Blueprint
from railyard.fabric.model import Fabric, Tier


@dataclass(frozen=True)
class HopClass:
    """Switches crossed between two GPUs of one pair class, and how the path is made."""

    pair: str
    switch_hops: int
    via: str  # "nvlink", "network", "pxn+network"


@dataclass(frozen=True)
class NetworkFigures:
    """What the fabric offers each GPU."""

    nic_gbit_s_per_gpu: float
    bisection_gbit_s_per_gpu: float
    bisection_gbyte_s_per_gpu: float
    full_bisection: bool
    oversubscription: dict[str, float]
    hops: list[HopClass]
    worst_case_hops: int
    cross_rail: str  # "network" or "pxn"


def bisection_gbit_s(fabric: Fabric) -> float:
    """Minimum over per-tier cuts between the two halves of the nodes (Gb/s, one direction)."""
    n_nodes = len(fabric.nodes)
    if n_nodes < 2:
        return 0.0
    base = fabric.num_endpoints
    n_vertices = base + len(fabric.switches)
    in_a = np.zeros(n_vertices, dtype=bool)
    in_b = np.zeros(n_vertices, dtype=bool)
    half = split_point(fabric)
    offsets = fabric.node_nic_offset
    in_a[: offsets[half]] = True
    in_b[offsets[half] : base] = True
    for t in (Tier.LEAF, Tier.SPINE, Tier.SUPER_SPINE):  # propagate "which halves are below"
        mask = fabric.link_tier == t
        np.logical_or.at(in_a, fabric.link_hi[mask], in_a[fabric.link_lo[mask]])
        np.logical_or.at(in_b, fabric.link_hi[mask], in_b[fabric.link_lo[mask]])
    pure_a = in_a & ~in_b
    tier_of = np.zeros(n_vertices, dtype=np.int8)
    tier_of[base:] = [s.tier for s in fabric.switches]
    cuts: list[float] = []
    for level in range(int(fabric.top_tier) + 1):
        side = pure_a & (tier_of <= level)
        crossing = side[fabric.link_lo] & ~side[fabric.link_hi]
        cuts.append(float(fabric.link_gbit_s[crossing].sum()))
    return min(cuts)


def split_point(fabric: Fabric) -> int:
    """Index of the first node of half B: on the coarsest boundary nearest the middle.

    Splitting inside a leaf group would let part of the traffic stay under one leaf and so
    hide the uplinks' oversubscription; cut between scalable units, else leaf groups.
    """
    nodes = fabric.nodes
    for key in (lambda n: n.su, lambda n: (n.su, n.leaf_group)):
        starts = [i for i in range(1, len(nodes)) if key(nodes[i]) != key(nodes[i - 1])]
        if starts:
            return min(starts, key=lambda i: abs(2 * i - len(nodes)))
    return len(nodes) // 2


def _switch_graph(fabric: Fabric) -> dict[int, set[int]]:
    base = fabric.num_endpoints
    mask = fabric.link_lo >= base
    pairs = np.unique(np.stack([fabric.link_lo[mask], fabric.link_hi[mask]], axis=1), axis=0)
    graph: dict[int, set[int]] = {i: set() for i in range(len(fabric.switches))}
    for lo, hi in pairs.tolist():
        graph[lo - base].add(hi - base)
        graph[hi - base].add(lo - base)
    return graph


def _distance(graph: dict[int, set[int]], src: int, dst: int) -> int | None:
    if src == dst:
        return 0
    seen = {src}
    frontier = deque([(src, 0)])
    while frontier:
        vertex, dist = frontier.popleft()
        for nxt in graph[vertex]:
            if nxt == dst:
                return dist + 1
            if nxt not in seen:
                seen.add(nxt)
                frontier.append((nxt, dist + 1))
    return None


def _representatives(fabric: Fabric) -> list[tuple[str, int, int]]:
    """(class, node a, node b) pairs; the same NIC rail unless the class says other rail."""
    nodes = fabric.nodes
    first = nodes[0]
    out: list[tuple[str, int, int]] = []
    same_lg = next((n for n in nodes[1:] if (n.su, n.leaf_group) == (first.su, 0)), None)
    if same_lg:
        out.append(("same leaf group", first.index, same_lg.index))
    other_lg = next((n for n in nodes if n.su == first.su and n.leaf_group != 0), None)
    if other_lg:
        out.append(("same scalable unit", first.index, other_lg.index))
    other_su = next((n for n in reversed(nodes) if n.su != first.su), None)
    if other_su:
        out.append(("other scalable unit", first.index, other_su.index))
    return out


def hop_classes(fabric: Fabric, nvlink_domain_gpus: int) -> list[HopClass]:
    """Switch hops between GPU pairs of each class, found by search on the built graph."""
    base = fabric.num_endpoints
    leaf_of = np.zeros(base, dtype=np.int64)
    host = fabric.link_tier == Tier.LEAF
    leaf_of[fabric.link_lo[host]] = fabric.link_hi[host] - base
    graph = _switch_graph(fabric)
    intra = "nvlink" if nvlink_domain_gpus > 1 else "pcie"
    out = [HopClass("same node", 0, intra)]
    rails = min(n.nics for n in fabric.nodes)
    for label, a, b in _representatives(fabric):
        for rail_b, suffix in ((0, ", same rail"), (1, ", other rail")):
            if rail_b >= rails:
                continue
            src = int(leaf_of[fabric.endpoint(a, 0)])
            dist = _distance(graph, src, int(leaf_of[fabric.endpoint(b, rail_b)]))
            via = "network"
            if dist is None:  # rails not joined: hop onto the right rail inside node a (PXN)
                dist = _distance(
                    graph,
                    int(leaf_of[fabric.endpoint(a, rail_b)]),
                    int(leaf_of[fabric.endpoint(b, rail_b)]),
                )
                via = "pxn+network"
            if dist is not None:
                out.append(HopClass(label + (suffix if rails > 1 else ""), dist + 1, via))
    return out


def network_figures(bp: Blueprint, fabric: Fabric) -> NetworkFigures:
    """Bisection, oversubscription and hop counts for ``fabric``."""
    gpus = sum(n.gpus for n in fabric.nodes) or len(fabric.nodes)
    nic_total = float(fabric.link_gbit_s[fabric.link_tier == Tier.LEAF].sum())
    bisection = bisection_gbit_s(fabric)
    half = split_point(fabric)
    side_gpus = [n.gpus or 1 for n in fabric.nodes]
    half_gpus = min(sum(side_gpus[:half]), sum(side_gpus[half:])) or 1
    per_gpu = bisection / half_gpus
    nic_per_gpu = nic_total / gpus
    domain = max(
        (bp.node_types[g.node_type].nvlink_domain_gpus for _, g, _ in bp.fabric_groups()),
        default=0,
    )
    hops = hop_classes(fabric, domain)
    return NetworkFigures(
        nic_gbit_s_per_gpu=nic_per_gpu,
        bisection_gbit_s_per_gpu=per_gpu,
        bisection_gbyte_s_per_gpu=per_gpu / 8,
        full_bisection=per_gpu >= nic_per_gpu * 0.999,
        oversubscription={t.tier.label: t.oversubscription for t in fabric.tiers if t.uplinks},
        hops=hops,
        worst_case_hops=max(h.switch_hops for h in hops),
        cross_rail="pxn" if any(h.via == "pxn+network" for h in hops) else "network",
    )
