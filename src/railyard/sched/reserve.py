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

import math
from collections.abc import Callable, Iterable, Sequence
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


def release_events(snap: Snapshot, flavor: str, blockers: Iterable[Blocker]) -> list[Blocker]:
    """Per node, each GPU is released by the latest-ending blocker that touches it."""
    topo = snap.topo
    per_node: dict[int, list[tuple[float, int]]] = {}
    for b in blockers:
        for i, m in b.masks.items():
            if topo.ready[i] and topo.flavor[i] == flavor:
                per_node.setdefault(i, []).append((b.end_t_s, m))
    events: list[tuple[float, int, int]] = []
    for i, claims in per_node.items():
        claims.sort(reverse=True)
        assigned = 0
        for t_s, m in claims:
            new = m & ~assigned & ~snap.free_mask[i]
            assigned |= m
            if new and t_s < math.inf:
                events.append((t_s, i, new))
    events.sort()
    out: list[Blocker] = []
    for t_s, i, m in events:
        if out and out[-1].end_t_s == t_s:
            out[-1].masks[i] = out[-1].masks.get(i, 0) | m
        else:
            out.append(Blocker(t_s, {i: m}))
    return out


def earliest_start(
    snap: Snapshot,
    shape: Shape,
    blockers: Sequence[Blocker],
    placement: PlacementPolicy,
    now_t_s: float,
    quota: QuotaTree | None = None,
    quota_fits: Callable[[], bool] | None = None,
) -> tuple[float, Masks] | None:
    """(start time, GPUs) at which `shape` fits once blockers end; None if never by estimates.

    With `quota_fits`, quota is released too (each blocker's charge to `quota`, undone before
    returning) and a time counts only once both GPUs and quota allow the start.
    """
    gpu_events = release_events(snap, shape.flavor, blockers)
    asks = shape.cpus_per_worker or shape.mem_per_worker_mib
    loads: list[tuple[float, Load]] = sorted(
        ((b.end_t_s, b.load) for b in blockers if asks and b.load and b.end_t_s < math.inf),
        key=lambda e: e[0],
    )
    charges: list[tuple[float, str, int]] = sorted(
        (b.end_t_s, b.queue, b.gpus)
        for b in blockers
        if quota_fits is not None
        and b.queue is not None
        and b.flavor == shape.flavor
        and b.gpus
        and b.end_t_s < math.inf
    )
    ends = {t for t, _ in loads}
    times = sorted({e.end_t_s for e in gpu_events} | {c[0] for c in charges} | ends)
    scratch = snap.copy()
    released: list[tuple[str, int]] = []
    g = c = n = 0
    try:
        for t_s in times:
            while g < len(gpu_events) and gpu_events[g].end_t_s <= t_s:
                scratch.release(gpu_events[g].masks)
                g += 1
            while loads and n < len(loads) and loads[n][0] <= t_s:
                scratch.release_load(loads[n][1])
                n += 1
            while c < len(charges) and charges[c][0] <= t_s:
                _, queue, gpus = charges[c]
                assert quota is not None  # charges exist only with quota_fits (and quota)
                quota.remove(queue, shape.flavor, gpus)
                released.append((queue, gpus))
                c += 1
            if quota_fits is not None and not quota_fits():
                continue
            if scratch.flavor_free.get(shape.flavor, 0) >= shape.gpus and scratch.may_fit(shape):
                found = placement.place(scratch, shape)
                if found is not None:
                    return max(t_s, now_t_s), found
        return None
    finally:
        for queue, gpus in reversed(released):
            assert quota is not None
            quota.add(queue, shape.flavor, gpus)
