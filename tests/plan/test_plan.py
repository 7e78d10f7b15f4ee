"""Plan figures against hand computation from the preset's own numbers."""

from __future__ import annotations

import pytest
from tests.conftest import blueprint

from railyard.blueprint import load
from railyard.fabric.build import build_fabric
from railyard.plan.bom import HOURS_PER_YEAR
from railyard.plan.network import bisection_gbit_s, network_figures
from railyard.plan.report import compare_designs, make_plan


def test_gaggle_bom_by_hand() -> None:
    bp = load("gaggle-h100").blueprint
    plan = make_plan(bp)
    bom = plan.bom
    assert plan.gpus == 12 * 8 + 2 * 4
    assert bom.gpus == {"H100-SXM-80GB": 96, "RTX-6000-Ada-48GB": 8}
    lines = {(ln.category, ln.item, ln.detail): ln.count for ln in bom.lines}
    assert lines[("switch", "QM9700", "leaf")] == 8
    assert lines[("switch", "QM9700", "spine")] == 2
    assert lines[("cable", "fiber", "fabric")] == 192  # 96 host + 96 leaf-spine
    assert lines[("optics", "transceiver", "fabric, 2 per fiber")] == 384
    # front-end: 2 x 25G per node on 20 nodes = 40 ports -> one 60-port SN3420
    assert lines[("switch", "SN3420", "front-end")] == 1
    it_w = (
        12 * 10200
        + 2 * 2000
        + 4 * 1000
        + 2 * 500  # nodes
        + 10 * 747
        + 150  # fabric and front-end switches
        + 384 * 9  # optics
        + 6000  # storage
    )
    assert bom.it_power_kw == pytest.approx(it_w / 1e3)
    assert bom.facility_power_kw == pytest.approx(it_w / 1e3 * 1.4)
    assert bom.energy_usd_per_year == pytest.approx(it_w / 1e3 * 1.4 * HOURS_PER_YEAR * 0.17)
    capex = (
        12 * 375000
        + 2 * 60000
        + 4 * 25000
        + 2 * 10000
        + 10 * 32000
        + 9000
        + 192 * 200
        + 384 * 900
        + 40 * 150
        + 1500000
    )
    assert bom.capex_usd == pytest.approx(capex)
    rack_units = 12 * 8 + 2 * 4 + 4 * 2 + 2 * 1 + 10 + 1 + 12
    assert bom.rack_units == rack_units
    assert bom.racks == max(-(-rack_units // 42), -(-it_w // 42000))


def test_gaggle_network_is_full_bisection() -> None:
    net = make_plan(load("gaggle-h100").blueprint).network
    assert net is not None
    assert net.bisection_gbyte_s_per_gpu == pytest.approx(50.0)  # 400 Gb/s per GPU
    assert net.full_bisection
    hops = {h.pair: h.switch_hops for h in net.hops}
    assert hops == {
        "same node": 0,
        "same leaf group, same rail": 1,
        "same leaf group, other rail": 3,
    }


def test_rail_2048_hops_and_storage() -> None:
    plan = make_plan(load("rail-2048").blueprint)
    assert plan.network is not None
    hops = {h.pair: h.switch_hops for h in plan.network.hops}
    assert hops["same leaf group, same rail"] == 1
    assert hops["same leaf group, other rail"] == 3
    assert hops["other scalable unit, same rail"] == 5
    assert plan.network.worst_case_hops == 5
    (share,) = plan.storage
    assert share.read_gbyte_s_per_gpu == pytest.approx(500 / 2048)
    assert share.limited_by == "aggregate"


def test_oversubscription_halves_bisection() -> None:
    # 2:1 on a 64-port ToR: 42 down ports hold 5 nodes (40 NICs), 20 uplinks; 20 nodes ->
    # 4 ToRs; the cut between ToR pairs carries 2 x 20 uplinks for 80 GPUs: 200 Gb/s each.
    full = build_fabric(blueprint(nodes=16, design="tor-clos", tiers=["QM9700"] * 2))
    half = build_fabric(
        blueprint(nodes=20, design="tor-clos", tiers=["QM9700"] * 2, oversubscription=2)
    )
    assert bisection_gbit_s(full) / 64 == pytest.approx(400)
    assert bisection_gbit_s(half) / 80 == pytest.approx(200)


def test_rail_only_crosses_rails_through_pxn() -> None:
    bp = load("phy-h100-4x200").blueprint
    net = network_figures(bp, build_fabric(bp))
    assert net.cross_rail == "pxn"
    vias = {h.pair: h.via for h in net.hops}
    assert vias["same leaf group, other rail"] == "pxn+network"
    assert vias["same leaf group, same rail"] == "network"


def test_compare_rail_2048() -> None:
    rows = {r.design: r for r in compare_designs(load("rail-2048").blueprint)}
    assert set(rows) == {"single", "tor-clos", "rail-only", "rail-optimized"}
    assert "2016 short" in rows["single"].error  # 2,048 NIC ports on a 32-port switch
    assert rows["rail-optimized"].switches == 320
    assert rows["rail-only"].tiers == 2
    assert rows["rail-only"].cross_rail == "pxn"
    assert rows["rail-only"].switches < rows["rail-optimized"].switches
    assert rows["rail-only"].worst_case_hops < rows["rail-optimized"].worst_case_hops
    for name in ("tor-clos", "rail-only", "rail-optimized"):
        assert rows[name].bisection_gbyte_s_per_gpu == pytest.approx(50.0)


def test_plan_json_round_trips() -> None:
    import json

    data = make_plan(load("rail-2048").blueprint).to_dict()
    again = json.loads(json.dumps(data))
    assert again["tiers"][0]["tier"] == "leaf"
    assert again["bom"]["lines"][0]["price_usd"] == 256 * 300000


def test_local_plan_without_fabric() -> None:
    plan = make_plan(load("local").blueprint)
    assert plan.network is None
    assert plan.tiers == []
