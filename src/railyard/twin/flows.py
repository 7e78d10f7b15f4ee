"""Max-min fair rates for flows on a fabric, and up-down routing of the folded Clos.

Collectives are limited by their slowest flow, and how slow that flow is depends on who shares
its cables. This module answers that in two steps:

1. :class:`Router` turns (source NIC, destination NIC) pairs into the resources each flow uses.
   A resource is one direction of one cable (cables are full duplex: ``i`` is the upward
   direction of cable ``i``, ``L + i`` the downward one) or, for adaptive routing, a *bundle*:
   every uplink of one switch taken together. Paths are up-down: climb to the lowest tier whose
   switches reach the destination leaf, then descend (the folded Clos of Leiserson's fat-tree,
   and of NVIDIA's DGX SuperPOD reference architectures).

   - ``ecmp``: each flow takes one cable at every hop, picked by a seeded hash of
     (source, destination, flow id, hop), the way switches hash a 5-tuple (RFC 2992). Two flows
     may land on one uplink while another stays idle: the collisions are real.
   - ``adaptive``: each flow is split evenly over every equal-cost next hop (fluid model of
     per-packet adaptive routing, as in InfiniBand AR and Spectrum-X). Because a folded Clos
     joins every lower switch to every upper switch of its group with equal cable counts, a
     flow spread evenly loads all uplinks of a switch equally, so those uplinks act as one
     pipe: a bundle whose capacity is their sum.

2. :func:`max_min_rates` fills rates progressively (Bertsekas & Gallager, *Data Networks*,
   2nd ed., section 6.5.2, "max-min fairness"): raise every unfrozen flow's rate together until
   a resource saturates, freeze the flows that cross it, repeat. Loads are sparse-incidence sums
   (``np.bincount``), so 100k flows of 6 hops solve in milliseconds.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from railyard.blueprint.models import Routing
from railyard.fabric.model import Fabric

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_REL_EPS = 1e-9  # a resource this close to full counts as saturated
_VECTOR_ROUNDS = 64
_MIN_ROUND_SHARE = 0.01  # leave the vectorised rounds when one freezes less than this


class NoPathError(ValueError):
    """Two endpoints share no switch above them (rail-only fabrics between rails)."""


@dataclass(frozen=True)
class Incidence:
    """Sparse flow x resource matrix: flow ``flow[k]`` puts ``coeff[k]`` of its rate on
    resource ``resource[k]``."""

    flow: IntArray
    resource: IntArray
    coeff: FloatArray
    n_flows: int


def max_min_rates(capacity: FloatArray, incidence: Incidence) -> FloatArray:
    """Max-min fair rate of every flow (progressive filling), in the unit of ``capacity``.

    Collective traffic is regular, so a few vectorised rounds (one per distinct bottleneck
    level) usually finish it. Irregular traffic can have thousands of levels; after
    ``_VECTOR_ROUNDS`` rounds, or once a round freezes few flows, the rest is filled event
    by event from a heap of the levels at which each resource would saturate, which costs
    O(entries log resources) in all.
    A flow that crosses no resource is unconstrained and gets ``inf``.
    """
    n = incidence.n_flows
    flow, res, coeff = incidence.flow, incidence.resource, incidence.coeff
    rates = np.zeros(n)
    frozen = np.ones(n, dtype=np.bool_)
    frozen[flow] = False
    rates[frozen] = np.inf
    remaining = capacity.astype(np.float64).copy()
    live = np.ones(flow.size, dtype=np.bool_)
    level = 0.0
    for _ in range(_VECTOR_ROUNDS):
        if not live.any():
            return rates
        load = np.bincount(res[live], weights=coeff[live], minlength=capacity.size)
        used = load > 0
        headroom = np.full(capacity.size, np.inf)
        headroom[used] = remaining[used] / load[used]
        step = float(headroom.min())
        level += step
        rates[~frozen] = level
        remaining -= step * load
        saturated = used & (remaining <= _REL_EPS * capacity)
        saturated[np.argmin(headroom)] = True  # always make progress despite rounding
        frozen[flow[live & saturated[res]]] = True
        before = int(live.sum())
        live &= ~frozen[flow]
        if before - int(live.sum()) < _MIN_ROUND_SHARE * before:
            break  # irregular traffic: many small levels, the heap is cheaper
    if live.any():
        _heap_fill(rates, frozen, remaining, level, flow[live], res[live], coeff[live])
    return rates


def _heap_fill(
    rates: FloatArray,
    frozen: npt.NDArray[np.bool_],
    remaining: FloatArray,
    level0: float,
    flow: IntArray,
    res: IntArray,
    coeff: FloatArray,
) -> None:
    """Finish progressive filling one saturation at a time (every unfrozen flow is at
    ``level0`` and ``remaining`` is each resource's spare capacity at that level)."""
    r_ids, r_of = np.unique(res, return_inverse=True)
    f_ids, f_of = np.unique(flow, return_inverse=True)
    by_res = np.argsort(r_of, kind="stable")
    by_flow = np.argsort(f_of, kind="stable")
    r_ptr = np.searchsorted(r_of[by_res], np.arange(r_ids.size + 1)).tolist()
    f_ptr = np.searchsorted(f_of[by_flow], np.arange(f_ids.size + 1)).tolist()
    res_flow = f_of[by_res].tolist()
    flow_res = r_of[by_flow].tolist()
    flow_coef = coeff[by_flow].tolist()
    weight = np.bincount(r_of, weights=coeff, minlength=r_ids.size).tolist()
    spare = remaining[r_ids].tolist()
    extra = [0.0] * r_ids.size  # load of flows frozen above level0
    heap = [(level0 + spare[r] / w, r) for r, w in enumerate(weight) if w > 0]
    heapq.heapify(heap)
    done = [False] * f_ids.size
    level = [0.0] * f_ids.size
    # A resource's saturation level only rises as flows freeze below it, so keys in the heap
    # are lower bounds: pop, recompute, and either push back the true level or saturate it.
    while heap:
        key, r = heapq.heappop(heap)
        w = weight[r]
        if w <= _REL_EPS:
            continue
        lvl = level0 + (spare[r] - extra[r]) / w
        if lvl > key * (1 + _REL_EPS):
            heapq.heappush(heap, (lvl, r))
            continue
        rise = lvl - level0
        for f in res_flow[r_ptr[r] : r_ptr[r + 1]]:
            if done[f]:
                continue
            done[f] = True
            level[f] = lvl
            for k in range(f_ptr[f], f_ptr[f + 1]):
                r2, c2 = flow_res[k], flow_coef[k]
                weight[r2] -= c2
                extra[r2] += c2 * rise
        weight[r] = 0.0
    hit = np.asarray(done, dtype=np.bool_)
    rates[f_ids[hit]] = np.asarray(level)[hit]
    frozen[f_ids[hit]] = True


def _mix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64 finaliser (Steele, Lea & Flood, OOPSLA 2014): a cheap well-spread hash."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def ecmp_hash(src: IntArray, dst: IntArray, flow_id: IntArray, seed: int, hop: int) -> IntArray:
    """A per-flow, per-hop hash like a switch's 5-tuple ECMP hash, seeded per fabric."""
    with np.errstate(over="ignore"):
        x = src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        x ^= _mix64(dst.astype(np.uint64) + np.uint64(seed * 1_000_003 + hop))
        x ^= _mix64(flow_id.astype(np.uint64) ^ np.uint64(0xD6E8FEB86659FD93))
        return (_mix64(x) >> np.uint64(1)).astype(np.int64)


class Router:
    """Up-down routes on one fabric; precomputes adjacency and reachability once."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        lo = fabric.link_lo.astype(np.int64)
        hi = fabric.link_hi.astype(np.int64)
        self.n_links = lo.size
        self.n_endpoints = n_ep = fabric.num_endpoints
        self.n_vertices = n_v = n_ep + len(fabric.switches)
        self.lo, self.hi = lo, hi
        # every NIC endpoint has exactly one cable, to its leaf
        host = lo < n_ep
        self.host_link = np.full(n_ep, -1, dtype=np.int64)
        self.host_link[lo[host]] = np.flatnonzero(host)
        self.leaf_of = hi[self.host_link]
        tier = np.zeros(n_v, dtype=np.int64)
        tier[n_ep:] = [int(s.tier) for s in fabric.switches]
        self.tier = tier
        # uplinks of every vertex, grouped (CSR) and sorted by upper end
        order = np.lexsort((hi, lo))
        self.up_links = order
        self.up_ptr = np.zeros(n_v + 1, dtype=np.int64)
        self.up_ptr[1:] = np.cumsum(np.bincount(lo, minlength=n_v))
        self.up_deg = np.diff(self.up_ptr)
        self.first_parent = np.full(n_v, -1, dtype=np.int64)
        has_up = self.up_deg > 0
        self.first_parent[has_up] = hi[order[self.up_ptr[:-1][has_up]]]
        # parallel cables between one (upper, lower) pair are contiguous in pair order
        self.pair_key = hi * n_v + lo
        self.pair_order = np.argsort(self.pair_key, kind="stable")
        self.pair_sorted = self.pair_key[self.pair_order]
        self._reach()
        self._bundles()

    def _reach(self) -> None:
        """Which leaves each switch reaches going down, and one id per distinct reach set."""
        n_ep = self.n_endpoints
        sw_tier = self.tier[n_ep:]
        leaves = np.flatnonzero(sw_tier == 1)
        self.leaf_index = np.full(self.n_vertices, -1, dtype=np.int64)
        self.leaf_index[n_ep + leaves] = np.arange(leaves.size)
        reach = np.zeros((sw_tier.size, leaves.size), dtype=np.bool_)
        reach[leaves, np.arange(leaves.size)] = True
        for t in range(2, int(sw_tier.max(initial=1)) + 1):
            mask = (self.tier[self.hi] == t) & (self.lo >= n_ep)
            uppers = np.unique(self.hi[mask])
            pos = np.searchsorted(uppers, self.hi[mask])
            acc = np.zeros((uppers.size, leaves.size), dtype=np.int64)
            np.add.at(acc, pos, reach[self.lo[mask] - n_ep].astype(np.int64))
            reach[uppers - n_ep] = acc > 0
        self.reach = reach  # rows: switches (vertex - num_endpoints); columns: leaves
        _, rid = np.unique(reach, axis=0, return_inverse=True)
        self.reach_id = np.full(self.n_vertices, -1, dtype=np.int64)
        self.reach_id[n_ep:] = rid.reshape(-1)
        self.n_reach = int(rid.max(initial=0)) + 1
        # child lookup: (upper switch, reach id of the wanted child) -> that child
        sw = self.lo >= n_ep
        keys = self.hi[sw] * self.n_reach + self.reach_id[self.lo[sw]]
        keys, first = np.unique(keys, return_index=True)
        self.child_keys = keys
        self.child_vals: IntArray = self.lo[sw][first]

    def _bundles(self) -> None:
        """Per switch: its distinct parents and the share of its uplink cables to each."""
        n_v = self.n_vertices
        lo, hi = self.lo, self.hi
        pairs, counts = np.unique(lo * n_v + hi, return_counts=True)
        p_lo, p_hi = pairs // n_v, pairs % n_v
        ptr = np.zeros(n_v + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.bincount(p_lo, minlength=n_v))
        width = int(np.diff(ptr).max()) if pairs.size else 1
        self.par_pad = np.full((n_v, width), -1, dtype=np.int64)
        self.par_share = np.zeros((n_v, width))
        slot = np.arange(pairs.size) - ptr[p_lo]
        self.par_pad[p_lo, slot] = p_hi
        self.par_share[p_lo, slot] = counts / self.up_deg[p_lo]

    # resources ----------------------------------------------------------------------------

    def capacity(self, link_rate: FloatArray) -> FloatArray:
        """Resource capacities from per-cable rates (either direction has the full rate)."""
        up_sum = np.bincount(self.lo, weights=link_rate, minlength=self.n_vertices)
        return np.concatenate([link_rate, link_rate, np.repeat(up_sum, 2)])

    def _up_bundle(self, v: IntArray) -> IntArray:
        return 2 * self.n_links + 2 * v

    def _down_bundle(self, v: IntArray) -> IntArray:
        return 2 * self.n_links + 2 * v + 1

    # routing ------------------------------------------------------------------------------

    def _child(self, upper: IntArray, toward_leaf: IntArray, tier_below: int) -> IntArray:
        """The child of ``upper`` on the way down to ``toward_leaf`` (one per Clos group)."""
        target = toward_leaf
        for _ in range(tier_below - 1):
            target = self.first_parent[target]
        keys = upper * self.n_reach + self.reach_id[target]
        pos = np.searchsorted(self.child_keys, keys)
        pos = np.minimum(pos, self.child_keys.size - 1)
        if not np.array_equal(self.child_keys[pos], keys):
            raise NoPathError("no down path from a top switch to the destination leaf")
        child: IntArray = self.child_vals[pos]
        return child

    def _cable(self, upper: IntArray, lower: IntArray, h: IntArray) -> IntArray:
        """One of the parallel cables between ``upper`` and ``lower``, picked by ``h``."""
        keys = upper * self.n_vertices + lower
        start = np.searchsorted(self.pair_sorted, keys, side="left")
        stop = np.searchsorted(self.pair_sorted, keys, side="right")
        if np.any(stop <= start):
            raise NoPathError("switches on a route are not cabled together")
        return self.pair_order[start + h % (stop - start)]

    def turn_tier(self, leaf_src: IntArray, leaf_dst: IntArray) -> IntArray:
        """Lowest tier whose switches above ``leaf_src`` reach ``leaf_dst`` (1: same leaf)."""
        turn = np.where(leaf_src == leaf_dst, 1, 0)
        anc = leaf_src.copy()
        col = self.leaf_index[leaf_dst]
        for t in range(2, int(self.tier.max()) + 1):
            pending = turn == 0
            if not pending.any():
                break
            anc = np.where(anc >= 0, self.first_parent[np.maximum(anc, 0)], -1)
            ok = pending & (anc >= 0)
            ok[ok] = self.reach[anc[ok] - self.n_endpoints, col[ok]]
            turn[ok] = t
        if np.any(turn == 0):
            raise NoPathError(
                "no network path between these NICs (rail-only: different rails meet only "
                "through PXN inside a node)"
            )
        return turn

    def route(
        self,
        src: IntArray,
        dst: IntArray,
        routing: Routing,
        *,
        seed: int = 0,
        flow_id: IntArray | None = None,
    ) -> Incidence:
        """Resources of each flow ``src[i] -> dst[i]`` (NIC endpoint ids)."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        fid = np.arange(src.size, dtype=np.int64) if flow_id is None else flow_id
        ls, ld = self.leaf_of[src], self.leaf_of[dst]
        turn = self.turn_tier(ls, ld)
        flows: list[IntArray] = []
        res: list[IntArray] = []
        coef: list[FloatArray] = []

        def add(f: IntArray, r: IntArray, c: FloatArray | float = 1.0) -> None:
            flows.append(f)
            res.append(r)
            coef.append(np.broadcast_to(np.asarray(c, dtype=np.float64), f.shape).copy())

        everyone = np.arange(src.size, dtype=np.int64)
        add(everyone, self.host_link[src])  # NIC egress
        add(everyone, self.n_links + self.host_link[dst])  # NIC ingress
        for t in np.unique(turn):
            idx = np.flatnonzero(turn == t)
            if t == 1:
                continue
            if routing == Routing.ECMP:
                self._ecmp(idx, src, dst, fid, ls, ld, int(t), seed, add)
            else:
                self._adaptive(idx, ls, ld, int(t), add)
        return Incidence(np.concatenate(flows), np.concatenate(res), np.concatenate(coef), src.size)

    def _ecmp(
        self,
        idx: IntArray,
        src: IntArray,
        dst: IntArray,
        fid: IntArray,
        ls: IntArray,
        ld: IntArray,
        turn: int,
        seed: int,
        add: _Adder,
    ) -> None:
        """One cable per hop: hash among uplinks going up, among parallel cables going down."""
        s, d, f = src[idx], dst[idx], fid[idx]
        cur = ls[idx]
        for hop in range(turn - 1):
            h = ecmp_hash(s, d, f, seed, hop)
            link = self.up_links[self.up_ptr[cur] + h % self.up_deg[cur]]
            add(idx, link)
            cur = self.hi[link]
        for hop, below in enumerate(range(turn - 1, 0, -1)):
            child = self._child(cur, ld[idx], below)
            link = self._cable(cur, child, ecmp_hash(s, d, f, seed, 16 + hop))
            add(idx, self.n_links + link)
            cur = child

    def _adaptive(self, idx: IntArray, ls: IntArray, ld: IntArray, turn: int, add: _Adder) -> None:
        """Even split over every equal-cost path: bundles of a switch's uplinks (see module)."""
        src_leaf, dst_leaf = ls[idx], ld[idx]
        add(idx, self._up_bundle(src_leaf))
        add(idx, self._down_bundle(dst_leaf))
        if turn == 2:
            return
        if turn != 3:
            raise NoPathError(f"routes turning at tier {turn} are not modelled")
        parents = self.par_pad[src_leaf]
        share = self.par_share[src_leaf]
        ok = parents >= 0
        rows = np.broadcast_to(idx[:, None], parents.shape)[ok]
        spine, weight = parents[ok], share[ok]
        dleaf = np.broadcast_to(dst_leaf[:, None], parents.shape)[ok]
        top = self.first_parent[spine]
        mirror = self._child(top, dleaf, 2)
        add(rows, self._up_bundle(spine), weight)
        add(rows, self._down_bundle(mirror), weight)


class _Adder(Protocol):
    """Records (flow, resource, coefficient) triples."""

    def __call__(self, f: IntArray, r: IntArray, c: FloatArray | float = 1.0) -> None: ...


# traffic patterns: which NIC sends to which ------------------------------------------------


def binary_tree_parents(n: int) -> list[int]:
    """Parent of each rank in NCCL's in-order binary tree (rank 0 is the root, -1): odd ranks
    are leaves, so shifting ranks by one gives the complementary second tree."""
    parents = [-1] * n
    for r in range(1, n):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parents[r] = up if up < n else r ^ bit
    return parents


_Ends = tuple[IntArray, IntArray]  # (fabric node index, NIC index) per flow
_MAX_FLOWS = 1 << 16  # sample the alltoall traffic matrix above this many flows


def pattern_flows(
    pattern: str, order: tuple[int, ...], nics: list[int], seed: int
) -> tuple[_Ends, _Ends, float]:
    """(node, nic) of every flow's source and destination, and how many real flows each
    sampled flow stands for. All flows of a pattern carry equal bytes."""
    nodes = np.asarray(order, dtype=np.int64)
    m = nodes.size
    rails = np.asarray(nics, dtype=np.int64)
    if pattern == "ring":  # one ring per rail, in placement order
        a = np.arange(m)
        s_pos, d_pos = a, (a + 1) % m
        return (*_per_rail(nodes, s_pos, d_pos, rails), 1.0)
    if pattern == "tree":  # two complementary trees (second: ranks shifted by one), up and down
        par = np.asarray(binary_tree_parents(m), dtype=np.int64)
        child = np.arange(1, m)
        pa = par[1:]
        s_pos = np.concatenate([child, pa, (child + 1) % m, (pa + 1) % m])
        d_pos = np.concatenate([pa, child, (pa + 1) % m, (child + 1) % m])
        return (*_per_rail(nodes, s_pos, d_pos, rails), 1.0)
    # alltoall: every ordered node pair, per rail (pxn) or every NIC pair (p2p). Above
    # _MAX_FLOWS, a seeded sample of (node shift, NIC shift) pairs shared by all sources keeps
    # the matrix balanced (every NIC still sends and receives the same number of flows); each
    # sampled flow then stands for ``scale`` real ones.
    r = rails.size
    shifts = (m - 1) * (1 if pattern == "a2a_pxn" else r)
    keep = max(1, min(shifts, _MAX_FLOWS // max(1, m * r)))
    pick = np.sort(np.random.default_rng(seed).permutation(shifts)[:keep])
    node_shift, nic_shift = pick % (m - 1) + 1, pick // (m - 1)
    src_node = np.repeat(np.arange(m), r * keep)
    src_slot = np.tile(np.repeat(np.arange(r), keep), m)
    dst_node = (src_node + np.tile(node_shift, m * r)) % m
    dst_slot = (src_slot + np.tile(nic_shift, m * r)) % r
    return (nodes[src_node], rails[src_slot]), (nodes[dst_node], rails[dst_slot]), shifts / keep


def _per_rail(
    nodes: IntArray, s_pos: IntArray, d_pos: IntArray, rails: IntArray
) -> tuple[_Ends, _Ends]:
    """Each node-level flow once per rail, NIC k to NIC k."""
    k = rails.size
    return (
        (np.repeat(nodes[s_pos], k), np.tile(rails, s_pos.size)),
        (np.repeat(nodes[d_pos], k), np.tile(rails, d_pos.size)),
    )
