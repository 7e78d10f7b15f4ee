"""Build the switch/link graph of a blueprint's fabric, for any size the switch radix allows.

The four designs differ only in how host NICs meet the leaves and how leaves are grouped under
spines (after seed article 003 and NVIDIA's DGX SuperPOD reference architectures):

- ``single``: every NIC on one switch.
- ``tor-clos``: all NICs of a node on its rack's ToR leaf; spines join the ToRs of a pod
  (scalable unit); super-spines join pods.
- ``rail-only``: NIC ``k`` of every node goes to rail leaf ``k``; optional rail spines join the
  rail-``k`` leaves of all scalable units; nothing joins different rails (PXN crosses them).
- ``rail-optimized``: rail leaves as above; spines in each scalable unit bridge its rails;
  super-spines join scalable units (3 tiers, 5 stages) or, with 2 tiers, one spine layer joins
  every leaf.

Sizing rule for a layer (folded Clos): each lower switch spreads its ``U`` uplinks evenly over
``S`` upper switches, ``m = U / S`` cables to each, so every lower switch reaches every upper
one. ``S`` is the smallest divisor of ``U`` that leaves each upper switch with no more than its
down ports. A partly filled scalable unit is cabled upward as if full (room to grow), as the
empty rack tops in seed 003 suggest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from railyard.blueprint.errors import Problem
from railyard.blueprint.models import Blueprint, CableKind, Design, FabricSpec, TierSpec
from railyard.fabric.model import Fabric, FabricError, FabricNode, Switch, Tier, TierSummary

RAIL_DESIGNS = (Design.RAIL_ONLY, Design.RAIL_OPTIMIZED)


def down_ports(ports: int, oversubscription: float, top: bool) -> int:
    """Ports facing down: all of them at the top tier, else ``ports * os / (1 + os)``."""
    return ports if top else math.floor(ports * oversubscription / (1 + oversubscription))


@dataclass
class _Builder:
    bp: Blueprint
    spec: FabricSpec
    switches: list[Switch] = field(default_factory=list)
    lo: list[int] = field(default_factory=list)
    hi: list[int] = field(default_factory=list)
    gbit: list[float] = field(default_factory=list)
    tier: list[int] = field(default_factory=list)
    optical: list[bool] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    num_endpoints: int = 0

    def tier_spec(self, t: Tier) -> TierSpec:
        return self.spec.tiers[t - 1]

    def is_top(self, t: Tier) -> bool:
        return t == len(self.spec.tiers)

    def add_switch(self, name: str, t: Tier, **where: int | None) -> int:
        index = len(self.switches)
        self.switches.append(Switch(index, name, t, self.tier_spec(t).switch, **where))
        return index

    def optical_below(self, t: Tier) -> bool:
        """Cables hanging below tier ``t`` switches: copper only for a ToR in its own rack."""
        kind = self.tier_spec(t).cable
        if kind == CableKind.AUTO:
            return not (t == Tier.LEAF and self.spec.design == Design.TOR_CLOS)
        return kind == CableKind.OPTICAL

    def link(self, lower_vertex: int, upper_switch: int, gbit_s: float, t: Tier) -> None:
        self.lo.append(lower_vertex)
        self.hi.append(self.num_endpoints + upper_switch)
        self.gbit.append(gbit_s)
        self.tier.append(int(t))
        self.optical.append(self.optical_below(t))

    def connect_layer(
        self, lower: list[int], uplinks: int, n_design: int, t: Tier, name: str, **where: int | None
    ) -> tuple[list[int], int]:
        """Put a layer of tier-``t`` switches above ``lower``; return them and their uplinks."""
        tier_spec = self.tier_spec(t)
        model = self.bp.switch_spec(tier_spec.switch)
        top = self.is_top(t)
        down = down_ports(model.ports, tier_spec.oversubscription, top)
        need = math.ceil(n_design * uplinks / down)
        sizes = [s for s in range(need, uplinks + 1) if uplinks % s == 0]
        if not sizes:
            lower_label = {Tier.LEAF: "leaves", Tier.SPINE: "spines"}[Tier(t - 1)]
            raise FabricError(
                Problem(
                    ("fabric", "tiers", t - 1, "switch"),
                    f"a {t.label} must reach all {n_design} {lower_label} of its group but "
                    f"'{tier_spec.switch}' has {down} down ports: {n_design - down} short",
                    "add a tier above, make scalable_unit_gpus smaller, or use a larger switch",
                )
            )
        count = sizes[0]
        per_pair = uplinks // count
        upper_uplinks = 0 if top else math.ceil(n_design * per_pair / tier_spec.oversubscription)
        used = n_design * per_pair + upper_uplinks
        if used > model.ports:
            raise FabricError(
                Problem(
                    ("fabric", "tiers", t - 1, "switch"),
                    f"each {t.label} needs {used} ports but '{tier_spec.switch}' has "
                    f"{model.ports}: {used - model.ports} short",
                    "raise this tier's oversubscription or use a larger switch",
                )
            )
        lower_speed = self.bp.switch_spec(self.tier_spec(Tier(t - 1)).switch).port_speed_gbit_s
        speed = min(lower_speed, model.port_speed_gbit_s)
        upper = [self.add_switch(name.format(i=i), t, plane=i, **where) for i in range(count)]
        for low in lower:
            for up in upper:
                for _ in range(per_pair):
                    self.link(self.num_endpoints + low, up, speed, t)
        return upper, upper_uplinks


def _expand_nodes(bp: Blueprint) -> list[tuple[str, str, int, int]]:
    """(name, group, gpus, nics) for every node on the fabric, in declaration order."""
    out: list[tuple[str, str, int, int]] = []
    for group_name, group, node in bp.fabric_groups():
        prefix = group.hostname_prefix or group_name
        width = max(3, len(str(group.count)))
        nics = node.nics.count if node.nics else 0
        for i in range(1, group.count + 1):
            out.append((f"{prefix}{i:0{width}d}", group_name, node.gpus, nics))
    return out


def build_fabric(bp: Blueprint) -> Fabric:
    """The fabric graph of ``bp``; raises :class:`FabricError` naming the field at fault."""
    spec = bp.fabric
    if spec is None:
        raise FabricError(Problem(("fabric",), "the blueprint declares no fabric", "add one"))
    hosts = _expand_nodes(bp)
    design = spec.design
    tiers = len(spec.tiers)
    rails = max(h[3] for h in hosts)
    nic_speed = {g: n.nics.speed_gbit_s for g, _, n in bp.fabric_groups() if n.nics}
    leaf_spec = spec.tiers[0]
    leaf_model = bp.switch_spec(leaf_spec.switch)
    leaf_down = down_ports(leaf_model.ports, leaf_spec.oversubscription, tiers == 1)
    if design == Design.SINGLE:
        if tiers > 1:
            raise FabricError(
                Problem(
                    ("fabric", "tiers"),
                    f"the single design has one switch tier, found {tiers}",
                    "remove the upper tiers or use tor-clos / rail-optimized",
                )
            )
        total = sum(h[3] for h in hosts)
        if total > leaf_model.ports:
            raise FabricError(
                Problem(
                    ("fabric", "tiers", 0, "switch"),
                    f"one switch must hold all {total} NIC ports but '{leaf_spec.switch}' has "
                    f"{leaf_model.ports}: {total - leaf_model.ports} short",
                    "use a larger (chassis) switch, or tor-clos / rail-optimized",
                )
            )
    per_node_on_leaf = 1 if design in RAIL_DESIGNS else rails
    per_leaf_cap = leaf_down // per_node_on_leaf if design != Design.SINGLE else len(hosts)
    if per_leaf_cap < 1:
        raise FabricError(
            Problem(
                ("fabric", "tiers", 0, "switch"),
                f"a node's {rails} NICs do not fit the {leaf_down} down ports of "
                f"'{leaf_spec.switch}'",
                "use a larger leaf switch or a rail design",
            )
        )
    su_nodes = _scalable_unit_nodes(bp, spec, hosts, per_leaf_cap, rails)
    per_leaf = min(per_leaf_cap, su_nodes)
    nodes = [
        FabricNode(i, name, group, gpus, nics, i // su_nodes, (i % su_nodes) // per_leaf)
        for i, (name, group, gpus, nics) in enumerate(hosts)
    ]
    offsets = np.zeros(len(nodes) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([n.nics for n in nodes])
    b = _Builder(bp, spec, num_endpoints=int(offsets[-1]))
    leaves = _leaf_layer(b, nodes, offsets, nic_speed, rails, design)
    _upper_layers(b, leaves, design, tiers, rails, per_leaf, su_nodes)
    fabric = Fabric(
        blueprint=bp.name,
        design=design,
        nodes=nodes,
        switches=b.switches,
        node_nic_offset=offsets,
        link_lo=np.asarray(b.lo, dtype=np.int32),
        link_hi=np.asarray(b.hi, dtype=np.int32),
        link_gbit_s=np.asarray(b.gbit, dtype=np.float64),
        link_tier=np.asarray(b.tier, dtype=np.int8),
        link_optical=np.asarray(b.optical, dtype=np.bool_),
        tiers=[],
        su_nodes=su_nodes,
        notes=b.notes,
    )
    fabric.tiers = summarize_tiers(bp, fabric)
    return fabric


def _scalable_unit_nodes(
    bp: Blueprint,
    spec: FabricSpec,
    hosts: list[tuple[str, str, int, int]],
    per_leaf_cap: int,
    rails: int,
) -> int:
    """Nodes per scalable unit: as declared, else the largest that two tiers can join."""
    gpus_per_node = max(1, hosts[0][2])
    if spec.scalable_unit_gpus is not None:
        return max(1, spec.scalable_unit_gpus // gpus_per_node)
    if len(spec.tiers) < 3:
        return len(hosts)
    spine = spec.tiers[1]
    spine_down = down_ports(bp.switch_spec(spine.switch).ports, spine.oversubscription, False)
    leaves_per_group = spine_down // rails if spec.design in RAIL_DESIGNS else spine_down
    return max(1, min(len(hosts), per_leaf_cap * max(1, leaves_per_group)))


def _leaf_layer(
    b: _Builder,
    nodes: list[FabricNode],
    offsets: np.typing.NDArray[np.int32],
    nic_speed: dict[str, float],
    rails: int,
    design: Design,
) -> dict[tuple[int, int], list[int]]:
    """Create leaves and host links; return leaves by (scalable unit, leaf group)."""
    leaves: dict[tuple[int, int], list[int]] = {}
    for node in nodes:
        key = (node.su, node.leaf_group)
        if key not in leaves:
            su, lg = key
            if design == Design.SINGLE:
                leaves[key] = [b.add_switch("switch0", Tier.LEAF, su=0)]
            elif design in RAIL_DESIGNS:
                leaves[key] = [
                    b.add_switch(f"su{su}-lg{lg}-rail{r}", Tier.LEAF, su=su, rail=r)
                    for r in range(rails)
                ]
            else:
                leaves[key] = [b.add_switch(f"su{su}-tor{lg}", Tier.LEAF, su=su)]
        group = leaves[key]
        speed = nic_speed[node.group]
        for k in range(node.nics):
            leaf = group[k] if design in RAIL_DESIGNS else group[0]
            b.link(int(offsets[node.index]) + k, leaf, speed, Tier.LEAF)
    return leaves


def _upper_layers(
    b: _Builder,
    leaves: dict[tuple[int, int], list[int]],
    design: Design,
    tiers: int,
    rails: int,
    per_leaf: int,
    su_nodes: int,
) -> None:
    """Spines and super-spines above the leaves, per design."""
    all_leaves = [leaf for group in leaves.values() for leaf in group]
    if tiers == 1:
        _check_one_tier(leaves, design, rails)
        return
    leaf_spec = b.spec.tiers[0]
    leaf_full_down = per_leaf * (1 if design in RAIL_DESIGNS else rails)
    leaf_up = math.ceil(leaf_full_down / leaf_spec.oversubscription)
    if design == Design.RAIL_ONLY:
        if tiers == 3:
            raise FabricError(
                Problem(
                    ("fabric", "tiers"),
                    "rail-only has no tier above the rail spines",
                    "use at most 2 tiers, or rail-optimized to join rails",
                )
            )
        for r in range(rails):
            rail_leaves = [group[r] for group in leaves.values()]
            if len(rail_leaves) > 1:
                b.connect_layer(
                    rail_leaves,
                    leaf_up,
                    len(rail_leaves),
                    Tier.SPINE,
                    f"rail{r}-spine{{i}}",
                    rail=r,
                )
        if all(len([g[r] for g in leaves.values()]) == 1 for r in range(rails)):
            b.notes.append("each rail has one leaf, so the rail-spine tier is not needed")
        return
    if tiers == 2:
        if len(all_leaves) == 1:
            b.notes.append("one leaf holds every node, so the spine tier is not needed")
            return
        b.connect_layer(all_leaves, leaf_up, len(all_leaves), Tier.SPINE, "spine{i}")
        return
    groups_per_su = math.ceil(su_nodes / per_leaf)
    leaves_per_su = groups_per_su * (rails if design in RAIL_DESIGNS else 1)
    planes: dict[int, list[int]] = {}
    spine_up = 0
    sus = sorted({su for su, _ in leaves})
    for su in sus:
        su_leaves = [leaf for (s, _), group in leaves.items() if s == su for leaf in group]
        spines, spine_up = b.connect_layer(
            su_leaves, leaf_up, leaves_per_su, Tier.SPINE, f"su{su}-spine{{i}}", su=su
        )
        for plane, spine in enumerate(spines):
            planes.setdefault(plane, []).append(spine)
    if len(sus) == 1:
        b.notes.append("one scalable unit, so the super-spine tier is not needed")
        return
    for plane, spines in planes.items():
        b.connect_layer(
            spines, spine_up, len(sus), Tier.SUPER_SPINE, f"plane{plane}-superspine{{i}}"
        )


def _check_one_tier(leaves: dict[tuple[int, int], list[int]], design: Design, rails: int) -> None:
    """With leaves only, every pair of nodes must share a leaf (per rail for rail designs)."""
    if len(leaves) <= 1 and (design != Design.RAIL_OPTIMIZED or rails == 1):
        return
    if design == Design.RAIL_OPTIMIZED:
        message, hint = "rail-optimized needs a spine tier to bridge rails", "add a spine tier"
    else:
        message = f"{len(leaves)} leaf groups need a spine tier to reach each other"
        hint = "add a spine tier, or a larger leaf switch"
    raise FabricError(Problem(("fabric", "tiers"), message, hint))


def summarize_tiers(bp: Blueprint, fabric: Fabric) -> list[TierSummary]:
    """Per tier: switches, ports used, links, and the oversubscription actually achieved."""
    n_sw = len(fabric.switches)
    base = fabric.num_endpoints
    down = np.bincount(fabric.link_hi - base, weights=fabric.link_gbit_s, minlength=n_sw)
    up_mask = fabric.link_lo >= base
    up = np.bincount(
        fabric.link_lo[up_mask] - base, weights=fabric.link_gbit_s[up_mask], minlength=n_sw
    )
    down_n = np.bincount(fabric.link_hi - base, minlength=n_sw)
    up_n = np.bincount(fabric.link_lo[up_mask] - base, minlength=n_sw)
    out: list[TierSummary] = []
    spec = bp.fabric
    assert spec is not None
    for t in (Tier.LEAF, Tier.SPINE, Tier.SUPER_SPINE):
        ids = [s.index for s in fabric.switches if s.tier == t]
        if not ids:
            continue
        model = spec.tiers[t - 1].switch
        ratios = [down[i] / up[i] for i in ids if up[i] > 0]
        out.append(
            TierSummary(
                tier=t,
                model=model,
                switches=len(ids),
                ports=len(ids) * bp.switch_spec(model).ports,
                ports_used=int(down_n[ids].sum() + up_n[ids].sum()),
                downlinks=int(down_n[ids].sum()),
                uplinks=int(up_n[ids].sum()),
                oversubscription=float(max(ratios)) if ratios else 0.0,
            )
        )
    return out
