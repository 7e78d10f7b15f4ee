"""Max-min fair rates on hand-solved cases, and up-down routing on built fabrics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from tests.conftest import blueprint

from railyard.blueprint import load
from railyard.blueprint.models import Routing
from railyard.fabric.build import build_fabric
from railyard.fabric.model import Fabric
from railyard.twin import flows
from railyard.twin.flows import Incidence, NoPathError, Router, max_min_rates


def _flows(paths: list[list[int]], coeff: list[list[float]] | None = None) -> Incidence:
    flow = [f for f, path in enumerate(paths) for _ in path]
    res = [r for path in paths for r in path]
    c = [x for row in coeff for x in row] if coeff else [1.0] * len(res)
    return Incidence(np.array(flow), np.array(res), np.array(c, dtype=float), len(paths))


def test_three_flows_on_two_links_textbook() -> None:
    # Bertsekas & Gallager: a long flow on both unit links, one short flow on each: all get 1/2
    rates = max_min_rates(np.array([1.0, 1.0]), _flows([[0, 1], [0], [1]]))
    np.testing.assert_allclose(rates, [0.5, 0.5, 0.5])


def test_shared_bottleneck_and_a_free_link() -> None:
    rates = max_min_rates(np.array([10.0, 10.0]), _flows([[0], [0], [1]]))
    np.testing.assert_allclose(rates, [5.0, 5.0, 10.0])


def test_freed_capacity_goes_to_the_others() -> None:
    # link 0 (cap 1) holds the long flow to 1/2; the short flow on link 1 (cap 2) takes 3/2
    rates = max_min_rates(np.array([1.0, 2.0]), _flows([[0, 1], [0], [1]]))
    np.testing.assert_allclose(rates, [0.5, 0.5, 1.5])


def test_split_flow_uses_both_halves() -> None:
    rates = max_min_rates(np.array([1.0, 1.0]), _flows([[0, 1]], [[0.5, 0.5]]))
    np.testing.assert_allclose(rates, [2.0])


def test_flow_on_no_resource_is_unconstrained() -> None:
    inc = Incidence(np.array([0]), np.array([0]), np.array([1.0]), 2)
    rates = max_min_rates(np.array([3.0]), inc)
    assert rates[0] == pytest.approx(3.0)
    assert np.isinf(rates[1])


@pytest.mark.parametrize("seed", range(5))
def test_conservation_and_every_flow_bottlenecked(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_links, n_flows = 40, 300
    cap = rng.uniform(1, 10, n_links)
    paths = [list(rng.choice(n_links, size=rng.integers(1, 6), replace=False)) for _ in range(300)]
    inc = _flows(paths)
    rates = max_min_rates(cap, inc)
    load = np.bincount(inc.resource, weights=rates[inc.flow], minlength=n_links)
    assert np.all(load <= cap * (1 + 1e-9))
    full = load >= cap * (1 - 1e-9)
    for f in range(n_flows):
        on_path = inc.resource[inc.flow == f]
        # bottlenecked: some full link on its path where no flow gets more than it does
        assert any(
            full[r] and rates[f] >= rates[inc.flow[inc.resource == r]].max() * (1 - 1e-9)
            for r in on_path
        )


@pytest.mark.parametrize("seed", range(3))
def test_event_heap_matches_vectorised_rounds(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    cap = rng.uniform(1, 10, 60)
    paths = [list(rng.choice(60, size=rng.integers(1, 5), replace=False)) for _ in range(500)]
    coeff = [list(rng.uniform(0.2, 1.0, len(p))) for p in paths]
    inc = _flows(paths, coeff)
    monkeypatch.setattr(flows, "_VECTOR_ROUNDS", 10_000)
    monkeypatch.setattr(flows, "_MIN_ROUND_SHARE", 0.0)
    vectorised = max_min_rates(cap, inc)
    monkeypatch.setattr(flows, "_VECTOR_ROUNDS", 0)
    np.testing.assert_allclose(max_min_rates(cap, inc), vectorised, rtol=1e-6)


def test_many_flows_solve() -> None:
    rng = np.random.default_rng(0)
    n_flows, hops, n_links = 100_000, 6, 20_000
    inc = Incidence(
        np.repeat(np.arange(n_flows), hops),
        rng.integers(0, n_links, n_flows * hops),
        np.ones(n_flows * hops),
        n_flows,
    )
    rates = max_min_rates(np.full(n_links, 100.0), inc)
    assert rates.shape == (n_flows,)
    assert np.all(rates > 0)


# routing ------------------------------------------------------------------------------------


def _ring(fabric: Fabric, nodes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    rails = fabric.nodes[0].nics
    src = [fabric.endpoint(nodes[i], k) for k in range(rails) for i in range(len(nodes))]
    dst = [
        fabric.endpoint(nodes[(i + 1) % len(nodes)], k)
        for k in range(rails)
        for i in range(len(nodes))
    ]
    return np.array(src), np.array(dst)


def _rates(fabric: Fabric, nodes: list[int], routing: Routing, seed: int = 0) -> np.ndarray:
    router = Router(fabric)
    src, dst = _ring(fabric, nodes)
    inc = router.route(src, dst, routing, seed=seed)
    return max_min_rates(router.capacity(fabric.link_gbit_s.astype(float)), inc)


@pytest.mark.parametrize("routing", list(Routing))
def test_rail_optimized_same_leaf_group_ring_gets_line_rate(routing: Routing) -> None:
    fabric = build_fabric(blueprint(nodes=12, design="rail-optimized", tiers=["QM9700"] * 2))
    router = Router(fabric)
    src, dst = _ring(fabric, list(range(12)))
    assert np.all(router.turn_tier(router.leaf_of[src], router.leaf_of[dst]) == 1)
    np.testing.assert_allclose(_rates(fabric, list(range(12)), routing), 400.0)


def test_rail_optimized_cross_group_ring_does_not_collide_under_ecmp() -> None:
    # 64 nodes: two leaf groups of 32 per rail; the ring crosses between them on every rail,
    # but each rail leaf sends only its own rail's flow up, so hashing cannot collide
    fabric = build_fabric(blueprint(nodes=64, design="rail-optimized", tiers=["QM9700"] * 2))
    nodes = [0, 1, 2, 3, 32, 33, 34, 35]
    for seed in range(10):
        np.testing.assert_allclose(_rates(fabric, nodes, Routing.ECMP, seed), 400.0)


def test_tor_clos_ecmp_collides_and_adaptive_does_not() -> None:
    # 8 nodes on two ToRs: eight flows (one per NIC) share each ToR's uplinks on the crossing
    fabric = build_fabric(blueprint(nodes=8, design="tor-clos", tiers=["QM9700"] * 2))
    nodes = list(range(8))
    ecmp_min = [_rates(fabric, nodes, Routing.ECMP, seed).min() for seed in range(10)]
    assert min(ecmp_min) < 400.0 * 0.99
    np.testing.assert_allclose(_rates(fabric, nodes, Routing.ADAPTIVE), 400.0)


def test_ecmp_routes_are_connected_up_down_paths() -> None:
    fabric = build_fabric(load("rail-2048").blueprint)
    router = Router(fabric)
    src, dst = _ring(fabric, [0, 17, 40, 200, 255])
    inc = router.route(src, dst, Routing.ECMP, seed=3)
    n_links = fabric.num_links
    for f in range(src.size):
        res = inc.resource[inc.flow == f]
        up = [r for r in res if r < n_links]
        down = [r - n_links for r in res if r >= n_links]
        lo, hi = fabric.link_lo, fabric.link_hi
        chain_up = [int(lo[up[0]])] + [int(hi[r]) for r in up]
        assert all(int(lo[r]) == v for r, v in zip(up, chain_up, strict=False))
        assert chain_up[0] == src[f]
        # the top of the climb is where the descent starts
        desc = sorted(down, key=lambda r: -fabric.link_tier[r])
        assert int(hi[desc[0]]) == chain_up[-1]
        assert all(int(lo[a]) == int(hi[b]) for a, b in itertools.pairwise(desc))
        assert int(lo[desc[-1]]) == dst[f]


def test_rail_only_has_no_path_between_rails() -> None:
    fabric = build_fabric(load("phy-h100-4x200").blueprint)
    router = Router(fabric)
    with pytest.raises(NoPathError, match="PXN"):
        router.route(
            np.array([fabric.endpoint(0, 0)]), np.array([fabric.endpoint(1, 1)]), Routing.ECMP
        )
