"""Bill of materials, capex, power, space and energy cost of a blueprint.

Counting rules (state them, so a reader can check by hand):
- cables: one per fabric link; optical ones carry a transceiver at each end;
- front-end: one cable per front-end NIC, all copper, on as many ToR switches as the ports need;
- IT power: node maximum power + switch typical power + transceivers + storage;
  facility power = IT power x PUE; yearly energy = facility kW x 8,760 h x price per kWh
  (full load all year: an upper bound);
- racks: the larger of rack units / units per rack and IT kW / kW per rack (a lower bound: it
  assumes perfect packing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from railyard.blueprint.models import Blueprint
from railyard.fabric.model import Fabric

HOURS_PER_YEAR = 8760


@dataclass(frozen=True)
class BomLine:
    """One kind of item: how many, what each costs and draws."""

    category: str  # node, switch, cable, optics, storage
    item: str
    detail: str
    count: int
    unit_price_usd: float
    unit_power_w: float
    rack_units: int = 0

    @property
    def price_usd(self) -> float:
        return self.count * self.unit_price_usd

    @property
    def power_w(self) -> float:
        return self.count * self.unit_power_w


@dataclass(frozen=True)
class Bom:
    """Everything to buy and what it adds up to."""

    lines: list[BomLine]
    gpus: dict[str, int]
    capex_usd: float
    network_capex_usd: float
    it_power_kw: float
    network_power_kw: float
    facility_power_kw: float
    rack_units: int
    racks: int
    energy_usd_per_year: float
    notes: list[str] = field(default_factory=list)


def _switch_line(bp: Blueprint, model: str, detail: str, count: int) -> BomLine:
    spec = bp.switch_spec(model)
    price = bp.cabling.switch_price_usd.get(model, 0.0)
    return BomLine("switch", model, detail, count, price, spec.power_w, spec.rack_units)


def bill_of_materials(bp: Blueprint, fabric: Fabric | None) -> Bom:
    """Count nodes, switches, cables and optics; add up money, power and space."""
    lines: list[BomLine] = []
    notes: list[str] = []
    gpus: dict[str, int] = {}
    frontend_ports = 0
    for name, group in bp.node_groups.items():
        node = bp.node_types[group.node_type]
        detail = name if name == group.role.value else f"{name} ({group.role.value})"
        lines.append(
            BomLine(
                "node",
                group.node_type,
                detail,
                group.count,
                node.price_usd,
                node.power_w,
                node.rack_units,
            )
        )
        if node.gpu:
            gpus[node.gpu] = gpus.get(node.gpu, 0) + node.gpus * group.count
        if node.frontend_nics:
            frontend_ports += node.frontend_nics.count * group.count
    cab = bp.cabling
    if fabric is not None:
        for tier in fabric.tiers:
            lines.append(_switch_line(bp, tier.model, tier.tier.label, tier.switches))
        optical = int(fabric.link_optical.sum())
        copper = fabric.num_links - optical
        if copper:
            lines.append(
                BomLine("cable", "copper (DAC)", "fabric", copper, cab.copper_cable_usd, 0)
            )
        if optical:
            lines.append(BomLine("cable", "fiber", "fabric", optical, cab.optical_cable_usd, 0))
            lines.append(
                BomLine(
                    "optics",
                    "transceiver",
                    "fabric, 2 per fiber",
                    2 * optical,
                    cab.transceiver_usd,
                    cab.transceiver_w,
                )
            )
    if bp.frontend is not None and frontend_ports:
        spec = bp.switch_spec(bp.frontend.switch)
        count = math.ceil(frontend_ports / spec.ports)
        lines.append(_switch_line(bp, bp.frontend.switch, "front-end", count))
        lines.append(
            BomLine("cable", "copper (DAC)", "front-end", frontend_ports, cab.copper_cable_usd, 0)
        )
    for name, store in bp.storage.items():
        lines.append(
            BomLine(
                "storage",
                name,
                f"{store.capacity_tbyte:g} TB",
                1,
                store.price_usd,
                store.power_w,
                store.rack_units,
            )
        )
    missing = sorted({ln.item for ln in lines if ln.category == "switch" and not ln.unit_price_usd})
    if missing:
        notes.append(f"no price for {', '.join(missing)}: set cabling.switch_price_usd")
    network = [ln for ln in lines if ln.category in ("switch", "cable", "optics")]
    it_kw = sum(ln.power_w for ln in lines) / 1e3
    rack_units = sum(ln.count * ln.rack_units for ln in lines)
    fac = bp.facility
    racks = max(
        math.ceil(rack_units / fac.rack_units_per_rack), math.ceil(it_kw / fac.rack_power_kw)
    )
    facility_kw = it_kw * fac.pue
    return Bom(
        lines=lines,
        gpus=gpus,
        capex_usd=sum(ln.price_usd for ln in lines),
        network_capex_usd=sum(ln.price_usd for ln in network),
        it_power_kw=it_kw,
        network_power_kw=sum(ln.power_w for ln in network) / 1e3,
        facility_power_kw=facility_kw,
        rack_units=rack_units,
        racks=racks,
        energy_usd_per_year=facility_kw * HOURS_PER_YEAR * fac.usd_per_kwh,
        notes=notes,
    )
