"""Rich tables for plans: what people read. ``--json`` bypasses this module entirely."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from railyard.plan.report import DesignRow, Plan


def _usd(value: float) -> str:
    if value >= 1e7:
        return f"${value / 1e6:,.1f}M"
    return f"${value / 1e6:,.2f}M" if value >= 1e5 else f"${value:,.0f}"


def print_plan(console: Console, plan: Plan) -> None:
    """Summary, bill of materials, fabric tiers, network figures and storage share."""
    console.print(f"[bold]{plan.blueprint}[/bold]: {plan.description}")
    if plan.follows:
        console.print(f"[dim]follows {plan.follows}[/dim]")
    bom = plan.bom
    summary = Table(title="Summary", show_header=False)
    summary.add_column("figure")
    summary.add_column("value")
    gpus = ", ".join(f"{count} x {model}" for model, count in bom.gpus.items()) or "none"
    summary.add_row("GPUs", f"{plan.gpus} ({gpus})")
    summary.add_row("nodes (on fabric)", f"{plan.nodes} ({plan.fabric_nodes})")
    summary.add_row("fabric design", plan.design or "none")
    summary.add_row("capex", _usd(bom.capex_usd))
    summary.add_row("  of which network", _usd(bom.network_capex_usd))
    summary.add_row("IT power", f"{bom.it_power_kw:,.1f} kW")
    summary.add_row("facility power (PUE)", f"{bom.facility_power_kw:,.1f} kW")
    summary.add_row("rack units / racks", f"{bom.rack_units} U / {bom.racks}")
    summary.add_row("energy per year (full load)", _usd(bom.energy_usd_per_year))
    console.print(summary)

    lines = Table(title="Bill of materials")
    for column in ("category", "item", "detail"):
        lines.add_column(column)
    for column in ("count", "unit price", "total", "power kW"):
        lines.add_column(column, justify="right")
    for line in bom.lines:
        lines.add_row(
            line.category,
            line.item,
            line.detail,
            f"{line.count:,}",
            _usd(line.unit_price_usd),
            _usd(line.price_usd),
            f"{line.power_w / 1e3:,.1f}",
        )
    console.print(lines)

    if plan.tiers:
        tiers = Table(title="Fabric tiers")
        tiers.add_column("tier")
        tiers.add_column("switch")
        for column in ("switches", "ports used", "downlinks", "uplinks", "down:up"):
            tiers.add_column(column, justify="right")
        for t in plan.tiers:
            ratio = f"{t.oversubscription:g}:1" if t.uplinks else "top"
            tiers.add_row(
                t.tier.label,
                t.model,
                str(t.switches),
                f"{t.ports_used}/{t.ports}",
                f"{t.downlinks:,}",
                f"{t.uplinks:,}",
                ratio,
            )
        console.print(tiers)
    net = plan.network
    if net is not None:
        hops = Table(title="Network")
        hops.add_column("GPU pair")
        hops.add_column("switch hops", justify="right")
        hops.add_column("path")
        for h in net.hops:
            hops.add_row(h.pair, str(h.switch_hops), h.via)
        console.print(hops)
        console.print(
            f"NIC bandwidth per GPU {net.nic_gbit_s_per_gpu:g} Gb/s; bisection per GPU "
            f"{net.bisection_gbit_s_per_gpu:g} Gb/s = {net.bisection_gbyte_s_per_gpu:g} GB/s "
            f"({'full bisection' if net.full_bisection else 'oversubscribed'}); "
            f"worst case {net.worst_case_hops} switch hops; cross-rail traffic via {net.cross_rail}"
        )
    for share in plan.storage:
        console.print(
            f"storage {share.system}: {share.read_gbyte_s_per_gpu:.2f} GB/s read per GPU "
            f"when all GPUs read (limited by {share.limited_by} bandwidth)"
        )
    for note in [*plan.fabric_notes, *bom.notes]:
        console.print(f"[yellow]note:[/yellow] {note}")


def print_compare(console: Console, name: str, rows: list[DesignRow]) -> None:
    """The four designs side by side for the same nodes; reasons for the impossible below."""
    table = Table(
        title=f"{name}: the same nodes under each fabric design",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("design", no_wrap=True)
    headers = (
        "tiers",
        "switches",
        "cables",
        "network\ncapex",
        "total\ncapex",
        "network\nkW",
        "bisection\nGB/s/GPU",
        "worst\nhops",
    )
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("cross-\nrail", no_wrap=True)
    for r in rows:
        if r.error:
            table.add_row(f"[red]{r.design}[/red]", *["-"] * 9)
            continue
        table.add_row(
            r.design,
            str(r.tiers),
            f"{r.switches:,}",
            f"{r.cables:,}",
            _usd(r.network_capex_usd),
            _usd(r.capex_usd),
            f"{r.network_power_kw:,.1f}",
            f"{r.bisection_gbyte_s_per_gpu:g}",
            str(r.worst_case_hops),
            r.cross_rail,
        )
    console.print(table)
    for r in rows:
        if r.error:
            console.print(f"[red]{r.design}[/red] cannot be built: {r.error}")
