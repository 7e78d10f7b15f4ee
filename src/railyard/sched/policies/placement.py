"""Placement policies: where a whole gang goes, or nowhere.

`fabric-aware`: a gang that fits one node goes to the node with the fewest free GPUs that
fits (best fit, so whole free nodes stay whole), inside one NVLink domain when possible.
Larger gangs take nodes in one leaf group if any can hold them (the tightest such group),
else in the fewest leaf groups of one scalable unit, else across the fewest scalable units.
Group capacities come from per-group histograms of free GPUs, never from scanning GPUs.
`first-fit`: nodes in inventory order; honours only *required* topology.

A job with a container image breaks `fabric-aware`'s ties (nodes of the same free count, leaf
groups of the same capacity) in favour of nodes that already hold its image, so it skips a
pull when that costs nothing else; it never takes a worse fit for it.

Both count a node's free cores and memory too: a chunk goes only where its GPUs, its cores
and its memory all fit. A gang that asks for cores or memory on a flavor whose nodes declare
them reads per-node capacities instead of the GPU histograms (slower, and only for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from operator import mul

from railyard.sched.model import Level, TopologyMode
from railyard.sched.policies.registry import PLACEMENT
from railyard.sched.snapshot import Masks, Shape, Snapshot, lowest_bits

_NVLINK_PROBE = 8  # nodes of equal free count probed for a one-domain fit


def pick_gpus(free_mask: int, domains: tuple[int, ...], need: int) -> int:
    """`need` free GPUs of one node: the tightest NVLink domain that fits, else spread."""
    best, best_count = 0, -1
    for d in domains:
        fd = free_mask & d
        c = fd.bit_count()
        if c >= need and (best_count < 0 or c < best_count):
            best, best_count = fd, c
    if best_count >= 0:
        return lowest_bits(best, need)
    out = 0
    for fd in sorted((free_mask & d for d in domains), key=lambda m: -m.bit_count()):
        got = lowest_bits(fd, need)
        out |= got
        need -= got.bit_count()
        if need <= 0:
            break
    return out


@cache
def _per_count(gpus_per_worker: int, counts: int) -> tuple[int, ...]:
    """Workers that fit a node with 0, 1, ... `counts - 1` free GPUs."""
    return tuple(f // gpus_per_worker for f in range(counts))


def _per_node(free: int, shape: Shape) -> int:
    """Workers of `shape` that fit a node with `free` GPUs."""
    k = free // shape.gpus_per_worker
    return min(k, 1) if shape.distinct_nodes else k


def _limited(snap: Snapshot, shape: Shape) -> bool:
    """Whether placement must read nodes one by one: the shape names nodes (--nodelist,
    --exclude), or cores or memory can stop it here (it asks, and its nodes declare)."""
    return shape.picks_nodes or (shape.asks_load and shape.flavor in snap.topo.limited)


def _fits_node(snap: Snapshot, i: int, shape: Shape) -> int:
    """Workers of `shape` that fit node `i`: its free GPUs, cores and memory."""
    return min(_per_node(snap.free[i], shape), snap.chunks_fit(i, shape))


def place_cpu_only(snap: Snapshot, shape: Shape) -> Masks | None:
    """A gang that needs no GPU: on one ready node of its flavor, or one worker on each of
    `workers` nodes with `distinct_nodes`, the first in inventory order whose free cores and
    memory hold it. It takes no GPU."""
    nodes = snap.topo.flavor_nodes.get(shape.flavor, [])
    need = shape.workers if shape.distinct_nodes else 1
    if _limited(snap, shape):
        per = 1 if shape.distinct_nodes else shape.workers
        nodes = [i for i in nodes if snap.chunks_fit(i, shape) >= per]
    if len(nodes) < need:
        return None
    return dict.fromkeys(nodes[:need], 0)


def _holders(snap: Snapshot, shape: Shape) -> frozenset[int] | None:
    """Nodes that hold the shape's image (None: it has none, or no node holds it)."""
    return snap.topo.image_nodes.get(shape.image) if shape.image is not None else None


def _held(snap: Snapshot, flavor: str, lg: int, holders: frozenset[int]) -> int:
    return sum(1 for i in snap.topo.lg_nodes[flavor, lg] if i in holders)


def _required_level(shape: Shape) -> Level:
    t = shape.topology
    return t.level if t is not None and t.mode is TopologyMode.REQUIRED else Level.FABRIC


@dataclass(frozen=True)
class FabricAware:
    name: str = "fabric-aware"

    def place(self, snap: Snapshot, shape: Shape) -> Masks | None:
        f = shape.flavor
        if shape.gpus_per_worker == 0:
            return place_cpu_only(snap, shape)
        if snap.flavor_free.get(f, 0) < shape.gpus:
            return None
        one_node_ok = shape.workers == 1 or not shape.distinct_nodes
        if one_node_ok and shape.gpus <= snap.topo.max_gpus.get(f, 0):
            one = self._one_node(snap, shape)
            if one is not None or shape.workers == 1:
                return one
        if _required_level(shape) is Level.NODE:
            return None
        return self._multi_node(snap, shape)

    def _one_node(self, snap: Snapshot, shape: Shape) -> Masks | None:
        need = shape.gpus
        buckets = snap.buckets[shape.flavor]
        domains = snap.topo.domain_masks
        limited = _limited(snap, shape)
        holders = _holders(snap, shape)
        for free in range(need, len(buckets)):
            nodes = buckets[free]
            if limited:
                nodes = [i for i in nodes if snap.chunks_fit(i, shape) >= shape.workers]
            if not nodes:
                continue
            probe = nodes[:_NVLINK_PROBE]
            if holders:  # those with the image first; one NVLink domain still comes first
                probe = [i for i in nodes if i in holders][:_NVLINK_PROBE] + probe
            chosen = probe[0]
            for i in probe:
                fm = snap.free_mask[i]
                if any((fm & d).bit_count() >= need for d in domains[i]):
                    chosen = i
                    break
            return {chosen: pick_gpus(snap.free_mask[chosen], domains[chosen], need)}
        return None

    def _multi_node(self, snap: Snapshot, shape: Shape) -> Masks | None:
        f, gpw, workers = shape.flavor, shape.gpus_per_worker, shape.workers
        distinct = shape.distinct_nodes
        if _limited(snap, shape):
            lg_nodes = snap.topo.lg_nodes
            caps = {
                lg: sum(_fits_node(snap, i, shape) for i in lg_nodes[f, lg])
                for lg in snap.lg_hist[f]
            }
        # workers of `gpw` GPUs that fit each leaf group, from its free-count histogram (at
        # most one a node with `distinct`), summed in C: 784 groups at 100,352 GPUs, each gang
        elif distinct:
            caps = {lg: sum(h[gpw:]) for lg, h in snap.lg_hist[f].items()}
        else:  # a flavor's histograms are all as long (`Snapshot`: its largest node + 1)
            hists = snap.lg_hist[f]
            per = _per_count(gpw, len(next(iter(hists.values())))) if hists else ()
            caps = {lg: sum(map(mul, h, per)) for lg, h in hists.items()}
        if sum(caps.values()) < workers:
            return None
        level = _required_level(shape)
        fits_one = [(c, lg) for lg, c in caps.items() if c >= workers]
        if fits_one:
            tightest, first = min(fits_one)
            holders = _holders(snap, shape)
            if holders:  # among the tightest groups, the one with most nodes holding the image
                tied = [lg for c, lg in fits_one if c == tightest]
                first = min(tied, key=lambda lg: (-_held(snap, f, lg, holders), lg))
            return self._fill(snap, shape, [first])
        if level <= Level.LEAF_GROUP:
            return None
        su_lgs = snap.topo.su_lgs[f]
        su_caps = {su: sum(caps[lg] for lg in lgs) for su, lgs in su_lgs.items()}
        best: tuple[int, int, int, list[int]] | None = None
        for su, lgs in su_lgs.items():
            if su_caps[su] < workers:
                continue
            ranked = sorted(lgs, key=lambda lg: (-caps[lg], lg))
            total = 0
            for n, lg in enumerate(ranked, start=1):
                total += caps[lg]
                if total >= workers:
                    cand = (n, total, su, ranked[:n])
                    if best is None or cand[:3] < best[:3]:
                        best = cand
                    break
        if best is not None:
            return self._fill(snap, shape, best[3])
        if level <= Level.SCALABLE_UNIT:
            return None
        chosen: list[int] = []
        total = 0
        for su in sorted(su_caps, key=lambda s: (-su_caps[s], s)):
            for lg in sorted(su_lgs[su], key=lambda lg: (-caps[lg], lg)):
                chosen.append(lg)
                total += caps[lg]
                if total >= workers:
                    return self._fill(snap, shape, chosen)
        return None

    def _fill(self, snap: Snapshot, shape: Shape, lgs: list[int]) -> Masks | None:
        gpw, remaining = shape.gpus_per_worker, shape.workers
        topo, out = snap.topo, {}
        limited = _limited(snap, shape)
        holders = _holders(snap, shape) or frozenset()
        for lg in lgs:
            nodes = sorted(
                (snap.free[i], i not in holders, i)
                for i in topo.lg_nodes[shape.flavor, lg]
                if snap.free[i] >= gpw
            )
            for free, _, i in nodes:
                k = _fits_node(snap, i, shape) if limited else _per_node(free, shape)
                k = min(k, remaining)
                if not k:
                    continue
                out[i] = pick_gpus(snap.free_mask[i], topo.domain_masks[i], k * gpw)
                remaining -= k
                if remaining == 0:
                    return out
        return None


@dataclass(frozen=True)
class FirstFit:
    name: str = "first-fit"

    def place(self, snap: Snapshot, shape: Shape) -> Masks | None:
        f = shape.flavor
        if shape.gpus_per_worker == 0:
            return place_cpu_only(snap, shape)
        if snap.flavor_free.get(f, 0) < shape.gpus:
            return None
        topo = snap.topo
        level = _required_level(shape)
        if level is Level.NODE:
            groups = [[i] for i in topo.flavor_nodes[f]]
        elif level is Level.LEAF_GROUP:
            groups = [topo.lg_nodes[f, lg] for su in topo.su_lgs[f].values() for lg in su]
        elif level is Level.SCALABLE_UNIT:
            groups = [topo.su_nodes[f, su] for su in topo.su_lgs[f]]
        else:
            groups = [topo.flavor_nodes[f]]
        limited = _limited(snap, shape)
        for nodes in groups:
            out, remaining = {}, shape.workers
            for i in nodes:
                k = _fits_node(snap, i, shape) if limited else _per_node(snap.free[i], shape)
                k = min(k, remaining)
                if k:
                    need = k * shape.gpus_per_worker
                    out[i] = lowest_bits(snap.free_mask[i], need)
                    remaining -= k
                    if remaining == 0:
                        return out
        return None


PLACEMENT.add(FabricAware())
PLACEMENT.add(FirstFit())
