"""Cross-field checks that pydantic's per-field validation cannot express."""

from __future__ import annotations

import re

from railyard.blueprint.errors import Problem, nearest
from railyard.blueprint.models import Blueprint, Design
from railyard.blueprint.partitions import MAX_NAME, NAME_RE, PARENT

FEATURE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _unknown(kind: str, name: str, known: set[str]) -> tuple[str, str]:
    guess = nearest(name, known)
    hint = f"did you mean '{guess}'?" if guess else f"known: {', '.join(sorted(known))}"
    return f"unknown {kind} '{name}'", hint


def check_references(bp: Blueprint) -> list[Problem]:
    """Every problem with names, counts and fits between sections, first one first."""
    problems: list[Problem] = []
    for name, group in bp.node_groups.items():
        if group.node_type not in bp.node_types:
            msg, hint = _unknown("node type", group.node_type, set(bp.node_types))
            problems.append(Problem(("node_groups", name, "node_type"), msg, hint))
    for name, node in bp.node_types.items():
        where = ("node_types", name)
        if node.gpu is not None and node.gpu not in bp.known_gpus():
            msg, hint = _unknown("GPU", node.gpu, bp.known_gpus())
            problems.append(Problem((*where, "gpu"), msg, hint))
        if node.gpus > 0 and node.gpu is None:
            problems.append(Problem((*where, "gpu"), "gpus > 0 but no GPU model", "name one"))
        if node.gpu is not None and node.gpus == 0:
            problems.append(Problem((*where, "gpus"), "a GPU model but 0 GPUs", "set gpus"))
        domain = node.nvlink_domain_gpus
        if domain and (domain > node.gpus or node.gpus % domain):
            problems.append(
                Problem(
                    (*where, "nvlink_domain_gpus"),
                    f"{domain} does not divide the node's {node.gpus} GPUs",
                    "use the NVSwitch domain size, e.g. 8 for HGX H100",
                )
            )
    if problems:
        return problems  # later checks assume names resolve
    problems += _check_partitions(bp)
    for name, group in bp.node_groups.items():
        for i, feature in enumerate(group.features):
            if not FEATURE_RE.match(feature):
                problems.append(Problem(("node_groups", name, "features", i),
                                        f"{feature!r} is not a feature name",
                                        "letters, digits, _ . - (e.g. ib, nvme)"))  # fmt: skip
    problems += _check_fabric(bp)
    if bp.frontend is not None and bp.frontend.switch not in bp.known_switches():
        msg, hint = _unknown("switch", bp.frontend.switch, bp.known_switches())
        problems.append(Problem(("frontend", "switch"), msg, hint))
    for switch in bp.cabling.switch_price_usd:
        if switch not in bp.known_switches():
            msg, hint = _unknown("switch", switch, bp.known_switches())
            problems.append(Problem(("cabling", "switch_price_usd", switch), msg, hint))
    return problems


def _check_fabric(bp: Blueprint) -> list[Problem]:
    fabric = bp.fabric
    attached = bp.fabric_groups()
    if fabric is None:
        return []
    if not attached:
        return [Problem(("fabric",), "no node group is on the fabric", "add a compute group")]
    problems: list[Problem] = []
    for i, tier in enumerate(fabric.tiers):
        if tier.switch not in bp.known_switches():
            msg, hint = _unknown("switch", tier.switch, bp.known_switches())
            problems.append(Problem(("fabric", "tiers", i, "switch"), msg, hint))
    if problems:
        return problems
    leaf = bp.switch_spec(fabric.tiers[0].switch)
    rails: set[int] = set()
    gpus_per_node: set[int] = set()
    for group_name, group, node in attached:
        if node.nics is None or node.nics.count == 0:
            problems.append(
                Problem(
                    ("node_types", group.node_type, "nics"),
                    f"node group '{group_name}' is on the fabric but its nodes have no NICs",
                    "declare nics: {count: 8, speed_gbit_s: 400} or set on_fabric: false",
                )
            )
            continue
        rails.add(node.nics.count)
        gpus_per_node.add(node.gpus)
        if node.nics.speed_gbit_s > leaf.port_speed_gbit_s:
            problems.append(
                Problem(
                    ("node_types", group.node_type, "nics", "speed_gbit_s"),
                    f"NIC speed {node.nics.speed_gbit_s:g} Gb/s exceeds the leaf switch "
                    f"'{fabric.tiers[0].switch}' port speed {leaf.port_speed_gbit_s:g} Gb/s",
                    "pick a faster leaf switch or slower NICs",
                )
            )
    if problems:
        return problems
    rail_design = fabric.design in (Design.RAIL_ONLY, Design.RAIL_OPTIMIZED)
    if rail_design and len(rails) > 1:
        problems.append(
            Problem(
                ("fabric", "design"),
                f"rail designs need the same NIC count on every fabric node, found {sorted(rails)}",
                "use tor-clos, or give the odd nodes on_fabric: false",
            )
        )
    su = fabric.scalable_unit_gpus
    if su is not None:
        for gpn in gpus_per_node:
            per = gpn or 1
            if su % per:
                problems.append(
                    Problem(
                        ("fabric", "scalable_unit_gpus"),
                        f"{su} GPUs is not a whole number of {per}-GPU nodes",
                        f"use a multiple of {per}, e.g. {per * max(1, round(su / per))}",
                    )
                )
    return problems


def _check_partitions(bp: Blueprint) -> list[Problem]:
    """Partition names are queue names (not `default`, their parent), at most one is the
    default, and each one's pool is a node group's."""
    problems: list[Problem] = []
    pools = {group.pool for group in bp.node_groups.values() if group.pool}
    defaults = [name for name, p in bp.partitions.items() if p.default]
    for name, partition in bp.partitions.items():
        where = ("partitions", name)
        if name == PARENT or not NAME_RE.match(name) or len(name) > MAX_NAME:
            why = "is their parent queue" if name == PARENT else "is not a queue name"
            problems.append(Problem(where, f"partition '{name}' {why}", "e.g. gpu or debug"))
        if partition.pool is not None and partition.pool not in pools:
            msg, hint = _unknown("pool", partition.pool, pools or {"(no node group has one)"})
            problems.append(Problem((*where, "pool"), msg, hint))
    if len(defaults) > 1:
        problems.append(
            Problem(
                ("partitions", defaults[1], "default"),
                f"a second default partition (after '{defaults[0]}')",
                "mark one partition default: true",
            )
        )
    return problems
