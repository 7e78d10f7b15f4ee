"""GPUs kept for a job that cannot start yet: reservations (backfill) and nominations
(preemption).

A reservation says "from `t_s` these GPUs are this job's"; a later job may use the free ones
only if it ends by `t_s`, or if it is preemptible (it then yields when the reserved job needs
them: `PreemptReason.RESERVATION`). A nomination (`t_s` = -inf) keeps the GPUs its victims
free for the preemptor and is never lent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from railyard.sched.snapshot import Masks, Snapshot, bits


@dataclass
class Hold:
    """`held` is the part taken from the snapshot now; `full` the whole placement (the rest
    is still busy with running jobs)."""

    job_id: str
    flavor: str
    t_s: float
    end_t_s: float
    full: Masks
    held: Masks

    @property
    def is_nomination(self) -> bool:
        return self.t_s == -math.inf


class HoldBook:
    """Every hold of one pass; hold k is bit k of the `usable` masks jobs carry."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.holds: list[Hold] = []
        self.lendable: dict[str, list[int]] = {}  # flavor -> reservation holds it may lend

    def usable(self, flavor: str, end_t_s: float, preemptible: bool) -> int:
        """Bit k set: reservation k's free GPUs may be used by a job of `flavor` ending at
        `end_t_s` (it ends before the reservation starts, or it is preemptible)."""
        usable = 0
        for k in self.lendable.get(flavor, ()):
            h = self.holds[k]
            if h.held and (preemptible or end_t_s <= h.t_s):
                usable |= 1 << k
        return usable

    def masks(self, usable: int) -> list[Masks]:
        return [self.holds[k].held for k in bits(usable)]

    def held_of(self, flavor: str) -> list[Masks]:
        return [h.held for h in self.holds if h.flavor == flavor and h.held]

    def add(self, job_id: str, flavor: str, t_s: float, end_t_s: float, masks: Masks) -> None:
        """Hold `masks` for a job: the free part is taken from the snapshot now."""
        free = self.snap.free_mask
        held = {i: m & free[i] for i, m in masks.items() if m & free[i]}
        self.snap.take(held)
        if t_s > -math.inf:
            self.lendable.setdefault(flavor, []).append(len(self.holds))
        self.holds.append(Hold(job_id, flavor, t_s, end_t_s, dict(masks), held))

    def give(self, flavor: str, masks: Masks) -> bool:
        """A job starts on `masks`: return the held GPUs it uses to the snapshot so it can
        take them. True if it started ahead of a reservation of its flavor (backfill)."""
        backfill = False
        for h in self.holds:
            if h.flavor != flavor:
                continue
            backfill = backfill or not h.is_nomination
            overlap = {i: h.held[i] & m for i, m in masks.items() if h.held.get(i, 0) & m}
            if overlap:
                self.snap.release(overlap)
                for i, m in overlap.items():
                    h.held[i] &= ~m
        return backfill

    def __len__(self) -> int:
        return len(self.holds)
