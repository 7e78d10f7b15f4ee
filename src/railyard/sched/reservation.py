"""Earliest start of a blocked job, from the walltime estimates of whatever holds GPUs.

A GPU held by several blockers (a running job, then a reservation made on it) is free only
when the last of them ends. Releasing GPUs event by event on a scratch snapshot reuses the
same incremental aggregates and the same placement policy as the live pass, so a reservation
is a placement the cycle itself would make at that time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from railyard.sched.policies.registry import PlacementPolicy
from railyard.sched.snapshot import Masks, Shape, Snapshot

Blocker = tuple[float, Masks]
"""(time its GPUs become free, the GPUs)."""


def release_events(snap: Snapshot, flavor: str, blockers: Iterable[Blocker]) -> list[Blocker]:
    """Per node, each GPU is released by the latest-ending blocker that touches it."""
    topo = snap.topo
    per_node: dict[int, list[tuple[float, int]]] = {}
    for t_s, masks in blockers:
        for i, m in masks.items():
            if topo.ready[i] and topo.flavor[i] == flavor:
                per_node.setdefault(i, []).append((t_s, m))
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
        if out and out[-1][0] == t_s:
            out[-1][1][i] = out[-1][1].get(i, 0) | m
        else:
            out.append((t_s, {i: m}))
    return out


def earliest_start(
    snap: Snapshot,
    shape: Shape,
    blockers: Iterable[Blocker],
    placement: PlacementPolicy,
    now_t_s: float,
) -> tuple[float, Masks] | None:
    """(start time, GPUs) at which `shape` fits once blockers end; None if never by estimates."""
    scratch = snap.copy()
    for t_s, masks in release_events(snap, shape.flavor, blockers):
        scratch.release(masks)
        if scratch.flavor_free[shape.flavor] >= shape.gpus and scratch.may_fit(shape):
            found = placement.place(scratch, shape)
            if found is not None:
                return max(t_s, now_t_s), found
    return None
