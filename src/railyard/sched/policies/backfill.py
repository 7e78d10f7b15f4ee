"""Backfill policies: which blocked jobs get a reservation that later jobs must not delay.

`strict`: no backfill at all: the first job blocked for resources stops every later job of its
  flavor (Slurm's `SchedulerType=sched/builtin`, Kueue's `StrictFIFO`). The FIFO baseline of
  the backfill literature (Mu'alem & Feitelson, IEEE TPDS 12(6), 2001).
`none`: no reservations and no blocking: later jobs start in any gap (Kueue's
  `BestEffortFIFO`); a blocked job is held back only once it starves.
`easy`: the first blocked job of each flavor (EASY backfill, Slurm's default behaviour).
`conservative`: every blocked job, in order, up to `max_reservations` per flavor.
"""

from __future__ import annotations

from dataclasses import dataclass

from railyard.sched.policies.registry import BACKFILL


@dataclass(frozen=True)
class NoBackfill:
    """No reservations; registered twice: `none` (greedy) and `strict` (blocking)."""

    name: str = "none"
    blocks: bool = False

    def reserves(self, reserved_for_flavor: int, max_reservations: int) -> bool:
        return False


@dataclass(frozen=True)
class Easy:
    name: str = "easy"
    blocks: bool = False

    def reserves(self, reserved_for_flavor: int, max_reservations: int) -> bool:
        return reserved_for_flavor == 0


@dataclass(frozen=True)
class Conservative:
    name: str = "conservative"
    blocks: bool = False

    def reserves(self, reserved_for_flavor: int, max_reservations: int) -> bool:
        return reserved_for_flavor < max_reservations


BACKFILL.add(NoBackfill(name="strict", blocks=True))
BACKFILL.add(NoBackfill())
BACKFILL.add(Easy())
BACKFILL.add(Conservative())
