"""Switch and link counts of each design, against sizes computed by hand in the comments."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from tests.conftest import blueprint

from railyard.blueprint import load
from railyard.fabric.build import build_fabric, down_ports
from railyard.fabric.model import Fabric, FabricError, Tier


def _counts(fabric: Fabric) -> dict[str, int]:
    return {t.tier.label: t.switches for t in fabric.tiers}


def _links(fabric: Fabric) -> dict[int, int]:
    return dict(Counter(fabric.link_tier.tolist()))


def _pair_multiplicity(fabric: Fabric, tier: Tier) -> set[int]:
    mask = fabric.link_tier == tier
    pairs = Counter(zip(fabric.link_lo[mask].tolist(), fabric.link_hi[mask].tolist(), strict=True))
    return set(pairs.values())


def test_down_ports() -> None:
    assert down_ports(64, 1.0, top=False) == 32
    assert down_ports(64, 3.0, top=False) == 48
    assert down_ports(64, 1.0, top=True) == 64


def test_gaggle_rail_optimized_two_tiers() -> None:
    # 12 nodes x 8 rails: 8 rail leaves with 12 hosts and 12 uplinks each. Two top-tier QM9700
    # spines (64 down ports): 8 leaves x 12 uplinks = 96 > 64, so 2 spines, 6 cables per pair.
    fabric = build_fabric(load("gaggle-h100").blueprint)
    assert _counts(fabric) == {"leaf": 8, "spine": 2}
    assert _links(fabric) == {1: 96, 2: 96}
    assert _pair_multiplicity(fabric, Tier.SPINE) == {6}


def test_rail_2048_three_tiers() -> None:
    # 16 SUs x 16 nodes; SN4700 has 32 ports: leaf 16 down / 16 up. Per SU 8 rail leaves ->
    # 8 spines (128 uplinks / 16 down ports), 2 cables per leaf-spine pair. Spine plane p of
    # every SU: 16 spines x 16 uplinks / 32 ports = 8 super-spines, 2 cables each: 8 x 8 = 64.
    fabric = build_fabric(load("rail-2048").blueprint)
    assert _counts(fabric) == {"leaf": 128, "spine": 128, "super-spine": 64}
    assert _links(fabric) == {1: 2048, 2: 2048, 3: 2048}
    assert _pair_multiplicity(fabric, Tier.SPINE) == {2}
    assert _pair_multiplicity(fabric, Tier.SUPER_SPINE) == {2}
    assert all(t.oversubscription in (1.0, 0.0) for t in fabric.tiers)


def test_rail_optimized_puts_nic_k_on_rail_leaf_k() -> None:
    fabric = build_fabric(load("rail-2048").blueprint)
    base = fabric.num_endpoints
    host = fabric.link_tier == Tier.LEAF
    for lo, hi in zip(fabric.link_lo[host].tolist(), fabric.link_hi[host].tolist(), strict=True):
        node = int(np.searchsorted(fabric.node_nic_offset, lo, side="right")) - 1
        nic = lo - int(fabric.node_nic_offset[node])
        leaf = fabric.switches[hi - base]
        assert leaf.rail == nic
        assert leaf.su == fabric.nodes[node].su


def test_rail_optimized_partial_scalable_unit_is_cabled_for_growth() -> None:
    # 20 nodes with 16-node SUs: SU1 holds 4 nodes but its leaves keep 16 uplinks each.
    fabric = build_fabric(
        blueprint(nodes=20, design="rail-optimized", tiers=["SN4700"] * 3, su_gpus=128)
    )
    assert _counts(fabric) == {"leaf": 16, "spine": 16, "super-spine": 8}
    assert _links(fabric)[1] == 160
    assert _links(fabric)[2] == 16 * 16


def test_tor_clos_two_tiers() -> None:
    # 64-port leaf, 1:1 -> 32 down = 4 nodes of 8 NICs per ToR; 8 nodes -> 2 ToRs with 32
    # uplinks each; one 64-port spine takes all 64 uplinks (32 cables per ToR).
    fabric = build_fabric(blueprint(nodes=8, design="tor-clos", tiers=["QM9700", "QM9700"]))
    assert _counts(fabric) == {"leaf": 2, "spine": 1}
    assert _links(fabric) == {1: 64, 2: 64}
    assert not fabric.link_optical[fabric.link_tier == Tier.LEAF].any()  # DAC inside the rack


def test_tor_clos_oversubscribed() -> None:
    # 3:1 on a 64-port ToR: 48 down (6 nodes), 16 up; 12 nodes -> 2 ToRs.
    fabric = build_fabric(
        blueprint(nodes=12, design="tor-clos", tiers=["QM9700", "QM9700"], oversubscription=3)
    )
    leaf = fabric.tiers[0]
    assert (leaf.switches, leaf.downlinks, leaf.uplinks) == (2, 96, 32)
    assert leaf.oversubscription == pytest.approx(3.0)


def test_rail_only_one_tier_is_one_leaf_per_rail() -> None:
    fabric = build_fabric(load("phy-h100-4x200").blueprint)  # 32 nodes x 4 rails, 64-port leaves
    assert _counts(fabric) == {"leaf": 4}
    assert _links(fabric) == {1: 128}


def test_rail_only_two_tiers_has_rail_spines_only() -> None:
    # 64 nodes x 4 NICs; 64-port leaf with 32 down -> 2 leaf groups x 4 rails = 8 leaves. Each
    # rail's 2 leaves (32 uplinks each) share one top spine; no spine joins two rails.
    fabric = build_fabric(blueprint(nodes=64, design="rail-only", tiers=["QM9700"] * 2, nics=4))
    assert _counts(fabric) == {"leaf": 8, "spine": 4}
    base = fabric.num_endpoints
    up = fabric.link_tier == Tier.SPINE
    for lo, hi in zip(fabric.link_lo[up].tolist(), fabric.link_hi[up].tolist(), strict=True):
        assert fabric.switches[lo - base].rail == fabric.switches[hi - base].rail


def test_single_switch() -> None:
    fabric = build_fabric(blueprint(nodes=8, design="single", tiers=["QM9700"]))
    assert _counts(fabric) == {"leaf": 1}
    assert _links(fabric) == {1: 64}


def test_single_switch_radix_overflow_says_by_how_much() -> None:
    with pytest.raises(FabricError) as info:
        build_fabric(blueprint(nodes=9, design="single", tiers=["QM9700"]))
    assert info.value.problem.path == ("fabric", "tiers", 0, "switch")
    assert "8 short" in info.value.problem.message


def test_two_tiers_too_small_for_2048_gpus() -> None:
    with pytest.raises(FabricError) as info:
        build_fabric(blueprint(nodes=256, design="rail-optimized", tiers=["SN4700"] * 2))
    problem = info.value.problem
    assert problem.path == ("fabric", "tiers", 1, "switch")
    assert "128 leaves" in problem.message
    assert "96 short" in problem.message  # 128 leaves, 32 down ports on a top spine
    assert "tier above" in problem.hint


def test_rail_optimized_needs_a_spine() -> None:
    with pytest.raises(FabricError, match="bridge rails"):
        build_fabric(blueprint(nodes=4, design="rail-optimized", tiers=["QM9700"]))


def test_rail_only_refuses_a_third_tier() -> None:
    with pytest.raises(FabricError, match="rail-only"):
        build_fabric(blueprint(nodes=64, design="rail-only", tiers=["SN4700"] * 3))


@pytest.mark.parametrize("design", ["tor-clos", "rail-only", "rail-optimized"])
def test_every_nic_is_cabled_once(design: str) -> None:
    fabric = build_fabric(blueprint(nodes=40, design=design, tiers=["QM9700"] * 2))
    host = fabric.link_lo[fabric.link_tier == Tier.LEAF]
    assert sorted(host.tolist()) == list(range(fabric.num_endpoints))


@pytest.mark.parametrize("design", ["tor-clos", "rail-optimized"])
def test_no_switch_exceeds_its_radix(design: str) -> None:
    fabric = build_fabric(blueprint(nodes=100, design=design, tiers=["SN4700"] * 3, su_gpus=128))
    base = fabric.num_endpoints
    used = np.bincount(fabric.link_hi - base, minlength=len(fabric.switches))
    lo_sw = fabric.link_lo[fabric.link_lo >= base] - base
    used += np.bincount(lo_sw, minlength=len(fabric.switches))
    assert used.max() <= 32
