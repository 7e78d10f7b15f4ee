"""GPUs kept for a job that cannot start yet: reservations (backfill) and nominations
(preemption).

A reservation says "from `t_s` these GPUs are this job's"; a later job may use the free ones
only if it ends by `t_s`, or if it is preemptible (it then yields when the reserved job needs
them: `PreemptReason.RESERVATION`). A nomination (`t_s` = -inf) keeps the GPUs its victims
free for the preemptor and is never lent. A hold keeps cores and memory the same way: the
part of its job's load that is free now is taken from the snapshot and lent on the same terms.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

from railyard.sched.snapshot import Load, Masks, Snapshot, bits


@dataclass
class Hold:
    """`held` is the part taken from the snapshot now; `full` the whole placement (the rest
    is still busy with running jobs); `held_load` the cores and memory taken now."""

    job_id: str
    flavor: str
    t_s: float
    end_t_s: float
    full: Masks
    held: Masks
    held_load: Load | None = None

    @property
    def is_nomination(self) -> bool:
        return self.t_s == -math.inf


class HoldBook:
    """Every hold of one pass; hold k is bit k of the `usable` masks jobs carry."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.holds: list[Hold] = []
        self.lendable: dict[str, list[int]] = {}  # flavor -> reservation holds it may lend
        self.version = 0  # bumped whenever a hold is added or gives some of what it holds
        self._lend_index: dict[str, tuple[int, list[float], list[int]]] = {}

    def usable(self, flavor: str, end_t_s: float, preemptible: bool) -> int:
        """Bit k set: reservation k's free GPUs may be used by a job of `flavor` ending at
        `end_t_s` (it ends before the reservation starts, or it is preemptible).

        Asked once per pending job: with 16 reservations and 10,000 jobs, looping over the
        holds each time was a fifth of a conservative-backfill cycle, so the holds that still
        lend something are indexed by start time, with the OR of their bits from each one
        on (rebuilt only after a hold changes)."""
        _, starts_t_s, bits_from = self.lend_index(flavor)
        return bits_from[0 if preemptible else bisect_left(starts_t_s, end_t_s)]

    def lend_index(self, flavor: str) -> tuple[int, list[float], list[int]]:
        """(version, start times ascending, OR of the bits of the holds from each one on) of
        the reservations of `flavor` that still lend something: `usable` in two lookups,
        for a caller that asks for thousands of jobs while `version` stays the same."""
        index = self._lend_index.get(flavor)
        if index is None or index[0] != self.version:
            index = self._lend_index[flavor] = self._index(flavor)
        return index

    def _index(self, flavor: str) -> tuple[int, list[float], list[int]]:
        """(version, start times ascending, OR of the bits of holds k.. on; one more: 0)."""
        lending = sorted(
            (h.t_s, k)
            for k in self.lendable.get(flavor, ())
            if (h := self.holds[k]).held or h.held_load
        )
        bits_from = [0] * (len(lending) + 1)
        for n in range(len(lending) - 1, -1, -1):
            bits_from[n] = bits_from[n + 1] | 1 << lending[n][1]
        return self.version, [t_s for t_s, _ in lending], bits_from

    def masks(self, usable: int) -> list[Masks]:
        return [self.holds[k].held for k in bits(usable)]

    def loads(self, usable: int) -> list[Load]:
        return [load for k in bits(usable) if (load := self.holds[k].held_load)]

    def held_of(self, flavor: str) -> list[Masks]:
        return [h.held for h in self.holds if h.flavor == flavor and h.held]

    def keeps(self, flavor: str) -> bool:
        """Does any job of this pass keep GPUs of `flavor`, free now or still busy?"""
        return any(h.flavor == flavor for h in self.holds)

    def held_loads_of(self, flavor: str) -> list[Load]:
        return [load for h in self.holds if h.flavor == flavor and (load := h.held_load)]

    def add(
        self,
        job_id: str,
        flavor: str,
        t_s: float,
        end_t_s: float,
        masks: Masks,
        load: Load | None = None,
    ) -> None:
        """Hold `masks` (and `load`) for a job: the free part is taken from the snapshot now."""
        snap = self.snap
        free = snap.free_mask
        held = {i: m & free[i] for i, m in masks.items() if m & free[i]}
        snap.take(held)
        held_load = None
        if load:
            fc, fm = snap.free_cpu, snap.free_mem
            held_load = {
                i: (min(c, max(0, fc[i])), min(m, max(0, fm[i]))) for i, (c, m) in load.items()
            }
            snap.take_load(held_load)
        if t_s > -math.inf:
            self.lendable.setdefault(flavor, []).append(len(self.holds))
        self.version += 1
        self.holds.append(Hold(job_id, flavor, t_s, end_t_s, dict(masks), held, held_load))

    def give(self, flavor: str, masks: Masks, load: Load | None = None, usable: int = 0) -> bool:
        """A job starts on `masks`: return the held GPUs it uses to the snapshot so it can
        take them, and from the holds in `usable` the cores and memory it lacks. True if it
        started ahead of a reservation of its flavor (backfill)."""
        if load and usable:
            self._give_load(load, usable)
        backfill = False
        for h in self.holds:
            if h.flavor != flavor:
                continue
            backfill = backfill or not h.is_nomination
            overlap = {i: h.held[i] & m for i, m in masks.items() if h.held.get(i, 0) & m}
            if overlap:
                self.version += 1
                self.snap.release(overlap)
                for i, m in overlap.items():
                    h.held[i] &= ~m
        return backfill

    def _give_load(self, load: Load, usable: int) -> None:
        snap = self.snap
        for i, (cores, mib) in load.items():
            short_c = cores - snap.free_cpu[i]
            short_m = mib - snap.free_mem[i]
            for k in bits(usable):
                if short_c <= 0 and short_m <= 0:
                    break
                h = self.holds[k]
                have_c, have_m = (h.held_load or {}).get(i, (0, 0))
                c, m = min(max(0, short_c), have_c), min(max(0, short_m), have_m)
                if c or m:
                    assert h.held_load is not None
                    self.version += 1
                    h.held_load[i] = (have_c - c, have_m - m)
                    snap.release_load({i: (c, m)})
                    short_c, short_m = short_c - c, short_m - m

    def __len__(self) -> int:
        return len(self.holds)
