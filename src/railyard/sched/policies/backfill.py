"""Backfill policies: which blocked jobs get a reservation that later jobs must not delay.

`none`: no reservations (a blocked job does not hold others back, except a starving one).
`easy`: the first blocked job of each flavor (EASY backfill, Slurm's default behaviour).
`conservative`: every blocked job, in order, up to `max_reservations` per flavor.
"""

from __future__ import annotations

from dataclasses import dataclass

from railyard.sched.policies.registry import BACKFILL


@dataclass(frozen=True)
class NoBackfill:
    name: str = "none"

    def reserves(self, reserved_for_flavor: int, max_reservations: int) -> bool:
        return False


@dataclass(frozen=True)
class Easy:
    name: str = "easy"

    def reserves(self, reserved_for_flavor: int, max_reservations: int) -> bool:
        return reserved_for_flavor == 0


@dataclass(frozen=True)
class Conservative:
    name: str = "conservative"

    def reserves(self, reserved_for_flavor: int, max_reservations: int) -> bool:
        return reserved_for_flavor < max_reservations


BACKFILL.add(NoBackfill())
BACKFILL.add(Easy())
BACKFILL.add(Conservative())
