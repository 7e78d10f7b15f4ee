"""Caches of one admission pass, in one place, with the one rule that makes them safe.

Within a pass free GPUs, cores, memory and quota only shrink (every what-if is undone on
exit), so a failure to place a shape, to fit a quota or to find victims stays a failure for
the rest of the pass. Whole decisions are reused only while nothing has changed: every start,
hold, victim search, strict block and reservation attempt bumps `epoch`, and a cached
decision carries the epoch it was made at. Caching is what lets one pass over 10,000 pending
jobs stay fast; the property tests check that decisions with and without a warm cache are
the same.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from railyard.sched.decisions import Reason
from railyard.sched.outcome import Outcome
from railyard.sched.snapshot import Shape


@dataclass
class PassMemo:
    epoch: int = 0
    decided: dict[Hashable, tuple[int, Outcome]] = field(default_factory=dict)
    """Jobs alike in everything a decision reads -> (epoch, outcome); read and written by
    `Pass.admit`, inline because it runs once per pending job per cycle."""
    place_fail: set[tuple[Shape, int]] = field(default_factory=set)
    """(shape, usable holds) that found no GPUs."""
    quota_fail: dict[tuple[str, str], int] = field(default_factory=dict)
    """(queue, flavor) -> smallest GPU count that did not fit the quota."""
    preempt_fail: set[Hashable] = field(default_factory=set)
    """(queue, priority, shape, ...) for which no victim set makes room."""
    diagnosed: dict[tuple[Shape, bool, int, int], Reason] = field(default_factory=dict)
    """(shape, quota ok, starts, holds) -> reason a blocked job waits."""

    def changed(self) -> None:
        self.epoch += 1

    def quota_failed(self, queue: str, flavor: str, gpus: int) -> bool:
        failed_at = self.quota_fail.get((queue, flavor))
        return failed_at is not None and gpus >= failed_at

    def note_quota_fail(self, queue: str, flavor: str, gpus: int) -> None:
        key = (queue, flavor)
        self.quota_fail[key] = min(self.quota_fail.get(key, gpus), gpus)
