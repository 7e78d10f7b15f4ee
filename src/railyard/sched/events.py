"""The running jobs' GPU release events, kept between cycles and moved by the blockers that
changed (issue 56).

A reservation search reads when each GPU of a flavor comes free (`reserve.BaseEvents`): at
100,352 GPUs that is 73,500 running jobs' claims sorted per node and then all together, some
230,000 new tuples a cycle (a fifth of a warm cycle, and the young objects that set off the
garbage collector's full passes). Between two cycles a few jobs start or end, and most keep
their blocker (`Booking.blockers` keeps those under a time limit of their own), so only the
nodes those few touch are derived again, as Kueue's and KAI's caches apply only the events
since. What is kept equals `reserve.base_events` of the same blockers on the pass's snapshot:
the GPUs a running job holds are busy all through a pass (holds take only free GPUs and
give back only what they took), so a node's events read only its claims.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Sequence
from itertools import compress
from operator import is_not

from railyard.sched.model import RunningJob
from railyard.sched.reserve import BaseEvents, Blocker
from railyard.sched.snapshot import Topology

# More nodes than this touched in one cycle are merged by sorting all events again rather
# than moved one by one (each move shifts the tail of a list of 73,500).
_MOVE_AT_MOST = 256

Change = tuple[str, Blocker | None, Blocker | None]  # job id, blocker before, after


def node_events(claims: dict[str, tuple[float, int]]) -> tuple[tuple[float, int], ...]:
    """`reserve._node_events` with `never` of one node's claims, all of them busy: each GPU
    comes free at the end of the latest claim that holds it (inf: never), by time. A tuple,
    which the garbage collector stops scanning (12,544 lists kept did not)."""
    assigned, out = 0, []
    for t_s, m in sorted(claims.values(), reverse=True):
        new = m & ~assigned
        assigned |= m
        if new:
            out.append((t_s, new))
    return tuple(reversed(out))


class _Flavor:
    """One flavor's claims per node (node -> job id -> (end, GPUs)) and their events."""

    def __init__(self) -> None:
        self.claims: dict[int, dict[str, tuple[float, int]]] = {}
        self.events = BaseEvents({}, [])


class KeptEvents:
    """The release events of the running jobs booked on one index, per flavor asked for.
    `of` reads the blockers of the cycle (`Booking.blockers`, in the booking's order) and
    moves what it kept by those that differ from the last ones it saw."""

    def __init__(self, topo: Topology) -> None:
        self._topo = topo
        self._flavors: dict[str, _Flavor] = {}
        # the running jobs and their blockers last seen (kept, not copied: compared with the
        # next ones position by position while the booking keeps its tuple of jobs)
        self._seen_running: Sequence[RunningJob] = ()
        self._seen: list[Blocker] = []

    def of(self, flavor: str, running: Sequence[RunningJob], blockers: list[Blocker]) -> BaseEvents:
        """The `BaseEvents` of `blockers` (one per job of `running`) for `flavor`."""
        if blockers is not self._seen:
            if self._flavors:
                changes = self._changes(running, blockers)
                for name, each in self._flavors.items():
                    self._move(name, each, changes)
            self._seen_running, self._seen = running, blockers
        kept = self._flavors.get(flavor)
        if kept is None:
            kept = self._flavors[flavor] = self._build(flavor, running, blockers)
        return kept.events

    def _build(
        self, flavor: str, running: Sequence[RunningJob], blockers: list[Blocker]
    ) -> _Flavor:
        """A flavor's claims and events from nothing (a start, a flavor new to a reservation)."""
        ready, node_flavor = self._topo.ready, self._topo.flavor
        out = _Flavor()
        claims = out.claims
        for r, b in zip(running, blockers, strict=True):  # every running job once
            t_s, job_id = b.end_t_s, r.id
            for i, m in b.masks.items():
                if ready[i] and node_flavor[i] == flavor:
                    here = claims.get(i)
                    if here is None:
                        claims[i] = {job_id: (t_s, m)}
                    else:
                        here[job_id] = (t_s, m)
        per_node: dict[int, Sequence[tuple[float, int]]] = {
            i: node_events(here) for i, here in claims.items()
        }
        ordered = [(t_s, i, m) for i, ev in per_node.items() for t_s, m in ev if t_s < math.inf]
        ordered.sort()
        out.events = BaseEvents(per_node, ordered)
        return out

    def _changes(self, running: Sequence[RunningJob], blockers: list[Blocker]) -> list[Change]:
        """Blockers new, ended or changed (end, GPUs) since the last ones seen."""
        out: list[Change] = []
        seen = self._seen
        if running is self._seen_running:  # the same jobs: only blockers made again differ
            for k in compress(range(len(blockers)), map(is_not, blockers, seen)):
                was, b = seen[k], blockers[k]
                if was.end_t_s != b.end_t_s or was.masks is not b.masks:
                    out.append((running[k].id, was, b))
            return out
        last = {r.id: b for r, b in zip(self._seen_running, seen, strict=True)}
        found = 0
        for r, b in zip(running, blockers, strict=True):
            before = last.get(r.id)
            found += before is not None
            if before is b:
                continue
            if before is None or before.end_t_s != b.end_t_s or before.masks is not b.masks:
                out.append((r.id, before, b))
        if found < len(last):  # some ended
            now = {r.id for r in running}
            out += [(job_id, b, None) for job_id, b in last.items() if job_id not in now]
        return out

    def _move(self, flavor: str, kept: _Flavor, changes: list[Change]) -> None:
        ready, node_flavor = self._topo.ready, self._topo.flavor
        claims, touched = kept.claims, set()
        for job_id, before, after in changes:
            for i in before.masks if before is not None else ():
                if ready[i] and node_flavor[i] == flavor:
                    del claims[i][job_id]
                    touched.add(i)
            if after is not None:
                t_s = after.end_t_s
                for i, m in after.masks.items():
                    if ready[i] and node_flavor[i] == flavor:
                        here = claims.get(i)
                        if here is None:
                            here = claims[i] = {}
                        here[job_id] = (t_s, m)
                        touched.add(i)
        if not touched:
            return
        per_node, ordered = kept.events
        move = len(touched) <= _MOVE_AT_MOST
        for i in touched:
            if move:
                for t_s, m in per_node.get(i, ()):
                    if t_s < math.inf:
                        del ordered[bisect_left(ordered, (t_s, i, m))]
            here = claims.get(i)
            if here:
                events = per_node[i] = node_events(here)
                if move:
                    for t_s, m in events:
                        if t_s < math.inf:
                            insort(ordered, (t_s, i, m))
            else:
                claims.pop(i, None)
                per_node.pop(i, None)
        if not move:
            ordered[:] = sorted(
                (t_s, i, m) for i, events in per_node.items() for t_s, m in events if t_s < math.inf
            )


__all__ = ["KeptEvents", "node_events"]
