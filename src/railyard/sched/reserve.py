"""Earliest start of a blocked job, from the estimated ends of whatever holds its GPUs and
its quota.

A GPU held by several blockers (a running job, then a reservation made on it) is free only
when the last of them ends; quota comes back when each job of the flavor ends, and so do the
cores and memory each blocker booked (a reservation books only those free when it was made:
the rest are still its running jobs', released when they end). Releasing
both event by event on a scratch snapshot and the quota tree reuses the same incremental
aggregates, placement policy and admission policy as the live pass, so a reservation is a
start the cycle itself would make at that time, whether GPUs or quota blocked the job.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from railyard.sched.policies.registry import PlacementPolicy
from railyard.sched.quota import QuotaTree
from railyard.sched.snapshot import Load, Masks, Shape, Snapshot


class Blocker(NamedTuple):
    """Something that holds GPUs (and maybe quota, cores and memory) until `end_t_s`."""

    end_t_s: float
    masks: Masks
    queue: str | None = None  # charged to this queue's quota, if any
    flavor: str | None = None
    gpus: int = 0
    load: Load | None = None  # cores and memory it books, taken from the snapshot


class BaseEvents(NamedTuple):
    """When the GPUs of a set of blockers (a pass's running jobs) come free, for one flavor:
    `per_node` node -> [(t_s, GPUs)], each GPU once, at the end of the latest blocker that
    holds it; `ordered` all of them as (t_s, node, GPUs), by time. A pass computes them once
    per flavor: conservative backfill searches up to 16 reservations a flavor, and deriving
    12,000 running jobs' events for each search was most of a cycle at 16,384 GPUs."""

    per_node: dict[int, list[tuple[float, int]]]
    ordered: list[tuple[float, int, int]]


Claims = list[tuple[float, int]]  # (end t_s, GPUs) of the blockers on one node


def _claims(snap: Snapshot, flavor: str, blockers: Iterable[Blocker]) -> dict[int, Claims]:
    topo = snap.topo
    per_node: dict[int, Claims] = {}
    for b in blockers:
        for i, m in b.masks.items():
            if topo.ready[i] and topo.flavor[i] == flavor:
                per_node.setdefault(i, []).append((b.end_t_s, m))
    return per_node


def _node_events(snap: Snapshot, i: int, claims: Claims) -> Claims:
    """Each GPU of node `i` is released by the latest-ending claim that touches it (a GPU free
    now is no event)."""
    claims.sort(reverse=True)
    assigned = 0
    out = []
    busy = ~snap.free_mask[i]
    for t_s, m in claims:
        new = m & ~assigned & busy
        assigned |= m
        if new and t_s < math.inf:
            out.append((t_s, new))
    out.reverse()
    return out


def base_events(snap: Snapshot, flavor: str, blockers: Iterable[Blocker]) -> BaseEvents:
    per_node = {i: _node_events(snap, i, c) for i, c in _claims(snap, flavor, blockers).items()}
    ordered = sorted((t_s, i, m) for i, events in per_node.items() for t_s, m in events)
    return BaseEvents(per_node, ordered)


def release_events(
    snap: Snapshot, flavor: str, base: BaseEvents, extra: Iterable[Blocker] = ()
) -> Iterator[tuple[float, Masks]]:
    """GPUs coming free, by time, grouped per instant: `base` with `extra` blockers on top
    (the nodes they touch are derived again: a GPU is free when its last holder ends).
    Lazy, so a search that finds its start early reads only the first events."""
    touched = _claims(snap, flavor, extra)
    again: list[tuple[float, int, int]] = []
    for i, claims in touched.items():
        merged = [*base.per_node.get(i, ()), *claims]
        again += [(t_s, i, m) for t_s, m in _node_events(snap, i, merged)]
    again.sort()
    if touched:
        kept: Iterable[tuple[float, int, int]] = (e for e in base.ordered if e[1] not in touched)
        stream: Iterable[tuple[float, int, int]] = heapq.merge(kept, again)
    else:
        stream = base.ordered
    group: Masks = {}
    group_t_s = -math.inf
    for t_s, i, m in stream:
        if group and t_s != group_t_s:
            yield group_t_s, group
            group = {}
        group_t_s = t_s
        group[i] = group.get(i, 0) | m
    if group:
        yield group_t_s, group


class _Sweep:
    """The free state of a search as events release GPUs, cores and memory, kept as plain
    counts (free GPUs of the flavor, how many workers' worth fit on single nodes) until those
    say a placement may fit; only then is a `Snapshot` built to place on, and updated event by
    event from there. A large gang's search reads hundreds of events before anything could
    fit, and keeping every aggregate of a full snapshot current for each of them was most of
    the cost of a reservation."""

    def __init__(self, snap: Snapshot, shape: Shape, with_loads: bool) -> None:
        self.base = snap
        self.shape = shape
        self.free_mask = list(snap.free_mask)
        self.free_cpu = list(snap.free_cpu) if with_loads else snap.free_cpu
        self.free_mem = list(snap.free_mem) if with_loads else snap.free_mem
        self.scratch: Snapshot | None = None
        buckets = snap.buckets.get(shape.flavor)
        self.any_node = buckets is not None
        self.flavor_free = snap.flavor_free.get(shape.flavor, 0)
        self.capacity = sum(
            len(nodes) * self._fits(free) for free, nodes in enumerate(buckets or ())
        )

    def _fits(self, free: int) -> int:
        """Workers of the shape that `free` GPUs of one node hold (as `Snapshot.may_fit`)."""
        gpw = self.shape.gpus_per_worker
        if gpw == 0 or free < gpw:
            return 0
        return 1 if self.shape.distinct_nodes else free // gpw

    def release(self, masks: Masks) -> None:
        if self.scratch is not None:
            self.scratch.release(masks)
            return
        free_mask = self.free_mask
        for i, m in masks.items():  # events come from ready nodes of the shape's flavor only
            fm = free_mask[i]
            if fm & m:
                raise ValueError(f"releasing free GPUs on node {self.base.topo.nodes[i].name}")
            old, new = fm.bit_count(), (fm | m).bit_count()
            free_mask[i] = fm | m
            self.flavor_free += new - old
            self.capacity += self._fits(new) - self._fits(old)

    def release_load(self, load: Load) -> None:
        if self.scratch is not None:
            self.scratch.release_load(load)
            return
        for i, (cores, mib) in load.items():
            self.free_cpu[i] += cores
            self.free_mem[i] += mib

    def may_fit(self) -> bool:
        shape = self.shape
        if self.scratch is not None:
            scratch = self.scratch
            return scratch.flavor_free.get(shape.flavor, 0) >= shape.gpus and scratch.may_fit(shape)
        return (
            self.any_node
            and self.flavor_free >= shape.gpus
            and (shape.gpus_per_worker == 0 or self.capacity >= shape.workers)
        )

    def snapshot(self) -> Snapshot:
        if self.scratch is None:
            self.scratch = Snapshot(self.base.topo, self.free_mask, self.free_cpu, self.free_mem)
        return self.scratch


def earliest_start(
    snap: Snapshot,
    shape: Shape,
    blockers: Sequence[Blocker],
    placement: PlacementPolicy,
    now_t_s: float,
    quota: QuotaTree | None = None,
    quota_fits: Callable[[], bool] | None = None,
    *,
    base: BaseEvents | None = None,
    extra: Sequence[Blocker] = (),
) -> tuple[float, Masks] | None:
    """(start time, GPUs) at which `shape` fits once blockers end; None if never by estimates.

    `blockers` and `extra` both block; a caller that keeps `base` (the GPU events of
    `blockers`, from :func:`base_events`) passes the few others as `extra`. With
    `quota_fits`, quota is released too (each blocker's charge to `quota`, undone before
    returning) and a time counts only once both GPUs and quota allow the start.
    """
    if base is None:
        base = base_events(snap, shape.flavor, blockers)
    every = [*blockers, *extra] if extra else blockers
    asks = shape.cpus_per_worker or shape.mem_per_worker_mib
    loads: list[tuple[float, Load]] = (
        sorted(
            ((b.end_t_s, b.load) for b in every if b.load and b.end_t_s < math.inf),
            key=lambda e: e[0],
        )
        if asks
        else []
    )
    charges: list[tuple[float, str, int]] = (
        sorted(
            (b.end_t_s, b.queue, b.gpus)
            for b in every
            if b.queue is not None and b.flavor == shape.flavor and b.gpus and b.end_t_s < math.inf
        )
        if quota_fits is not None
        else []
    )
    gpu_events = release_events(snap, shape.flavor, base, extra)
    upcoming = next(gpu_events, None)
    sweep = _Sweep(snap, shape, bool(loads))
    released: list[tuple[str, int]] = []
    c = n = 0
    try:
        while True:
            t_s = min(
                upcoming[0] if upcoming is not None else math.inf,
                loads[n][0] if n < len(loads) else math.inf,
                charges[c][0] if c < len(charges) else math.inf,
            )
            if t_s == math.inf:
                return None
            while upcoming is not None and upcoming[0] <= t_s:
                sweep.release(upcoming[1])
                upcoming = next(gpu_events, None)
            while n < len(loads) and loads[n][0] <= t_s:
                sweep.release_load(loads[n][1])
                n += 1
            while c < len(charges) and charges[c][0] <= t_s:
                _, queue, gpus = charges[c]
                assert quota is not None  # charges exist only with quota_fits (and quota)
                quota.remove(queue, shape.flavor, gpus)
                released.append((queue, gpus))
                c += 1
            if quota_fits is not None and not quota_fits():
                continue
            if sweep.may_fit():
                found = placement.place(sweep.snapshot(), shape)
                if found is not None:
                    return max(t_s, now_t_s), found
    finally:
        for queue, gpus in reversed(released):
            assert quota is not None
            quota.add(queue, shape.flavor, gpus)
