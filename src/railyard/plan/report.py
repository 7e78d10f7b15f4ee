"""A plan: the blueprint's bill of materials and network figures, and the four-design comparison."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from railyard.blueprint.models import Blueprint, Design, FabricSpec, TierSpec
from railyard.fabric.build import build_fabric
from railyard.fabric.model import Fabric, FabricError, TierSummary
from railyard.plan.bom import Bom, bill_of_materials
from railyard.plan.network import NetworkFigures, network_figures


@dataclass(frozen=True)
class StorageShare:
    """What one storage system gives each GPU when every compute GPU reads at once."""

    system: str
    read_gbyte_s_per_gpu: float
    limited_by: str  # "aggregate" or "per-client"


@dataclass(frozen=True)
class Plan:
    blueprint: str
    description: str
    follows: str
    design: str | None
    nodes: int
    fabric_nodes: int
    gpus: int
    bom: Bom
    tiers: list[TierSummary]
    network: NetworkFigures | None
    storage: list[StorageShare]
    fabric_notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``; tier enums become their labels."""
        data = dataclasses.asdict(self)
        for tier in data["tiers"]:
            tier["tier"] = tier["tier"].label
        for line, obj in zip(data["bom"]["lines"], self.bom.lines, strict=True):
            line["price_usd"] = obj.price_usd
            line["power_w"] = obj.power_w
        return data


def storage_shares(bp: Blueprint, fabric: Fabric | None) -> list[StorageShare]:
    """Per-GPU read bandwidth: the aggregate split over all GPUs, capped per client node."""
    nodes = fabric.nodes if fabric else []
    gpus = sum(n.gpus for n in nodes)
    per_node = max((n.gpus for n in nodes), default=0)
    out: list[StorageShare] = []
    for name, store in bp.storage.items():
        if not gpus:
            continue
        aggregate = store.read_gbyte_s / gpus
        client = store.per_client_gbyte_s / per_node
        out.append(
            StorageShare(
                name, min(aggregate, client), "aggregate" if aggregate < client else "per-client"
            )
        )
    return out


def make_plan(bp: Blueprint) -> Plan:
    """Build the fabric and compute every figure ``railyard plan`` prints."""
    fabric = build_fabric(bp) if bp.fabric is not None else None
    gpus = sum(bp.node_types[g.node_type].gpus * g.count for g in bp.node_groups.values())
    return Plan(
        blueprint=bp.name,
        description=bp.description,
        follows=bp.follows,
        design=bp.fabric.design.value if bp.fabric else None,
        nodes=sum(g.count for g in bp.node_groups.values()),
        fabric_nodes=len(fabric.nodes) if fabric else 0,
        gpus=gpus,
        bom=bill_of_materials(bp, fabric),
        tiers=fabric.tiers if fabric else [],
        network=network_figures(bp, fabric) if fabric and len(fabric.nodes) > 1 else None,
        storage=storage_shares(bp, fabric),
        fabric_notes=fabric.notes if fabric else [],
    )


@dataclass(frozen=True)
class DesignRow:
    """One design in ``plan --compare``; ``error`` says why it cannot be built."""

    design: str
    tiers: int
    switches: int
    cables: int
    network_capex_usd: float
    capex_usd: float
    network_power_kw: float
    bisection_gbyte_s_per_gpu: float
    worst_case_hops: int
    cross_rail: str
    error: str = ""


def compare_designs(bp: Blueprint) -> list[DesignRow]:
    """The same nodes under each design, with the fewest tiers of the blueprint's switches.

    Every tier uses the blueprint's leaf switch and oversubscription, so the rows differ only
    in how the switches are wired, which is the argument of seed article 003.
    """
    if bp.fabric is None:
        return []
    leaf = bp.fabric.tiers[0]
    rows: list[DesignRow] = []
    for design in Design:
        max_tiers = {Design.SINGLE: 1, Design.RAIL_ONLY: 2}.get(design, 3)
        error = ""
        for tiers in range(1, max_tiers + 1):
            spec = FabricSpec(
                design=design,
                transport=bp.fabric.transport,
                routing=bp.fabric.routing,
                scalable_unit_gpus=bp.fabric.scalable_unit_gpus if tiers == 3 else None,
                tiers=[TierSpec(switch=leaf.switch, oversubscription=leaf.oversubscription)]
                * tiers,
            )
            variant = bp.model_copy(update={"fabric": spec})
            try:
                plan = make_plan(variant)
            except FabricError as exc:
                error = exc.problem.message
                continue
            net = plan.network
            rows.append(
                DesignRow(
                    design=design.value,
                    tiers=tiers,
                    switches=sum(t.switches for t in plan.tiers),
                    cables=sum(t.downlinks for t in plan.tiers),
                    network_capex_usd=plan.bom.network_capex_usd,
                    capex_usd=plan.bom.capex_usd,
                    network_power_kw=plan.bom.network_power_kw,
                    bisection_gbyte_s_per_gpu=net.bisection_gbyte_s_per_gpu if net else 0.0,
                    worst_case_hops=net.worst_case_hops if net else 0,
                    cross_rail=net.cross_rail if net else "-",
                )
            )
            break
        else:
            rows.append(DesignRow(design.value, 0, 0, 0, 0, 0, 0, 0, 0, "-", error=error))
    return rows
