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
from collections.abc import Iterator, Sequence
from functools import reduce
from itertools import compress
from operator import ne, or_
from typing import overload

from railyard.sched.model import RunningJob
from railyard.sched.reserve import BaseEvents, Blocker, all_ordered
from railyard.sched.snapshot import Load, Masks, Topology


class RunningBlockers(Sequence[Blocker]):
    """A booking's running jobs as blockers, one per job in its order (by id), kept as
    columns: the jobs, their estimated ends, their GPUs and their cores and memory. A
    `Blocker` is made only where one is read, and let go: the 73,500 made on a start at
    100,352 GPUs and kept (NamedTuples, which the garbage collector tracks for good) set off
    two of its full passes over the heap (issue 56). The columns are never changed: a
    booking that changes makes new ones."""

    __slots__ = ("ends", "loads", "masks", "running")

    def __init__(
        self,
        running: Sequence[RunningJob],
        ends: Sequence[float],
        masks: Sequence[Masks],
        loads: Sequence[Load | None],
    ) -> None:
        self.running = running
        self.ends = ends  # estimated end, t_s
        self.masks = masks
        self.loads = loads

    def __len__(self) -> int:
        return len(self.running)

    @overload
    def __getitem__(self, k: int) -> Blocker: ...

    @overload
    def __getitem__(self, k: slice) -> list[Blocker]: ...

    def __getitem__(self, k: int | slice) -> Blocker | list[Blocker]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        r = self.running[k]
        job = r.job
        return Blocker(self.ends[k], self.masks[k], job.queue, job.flavor, r.gpus, self.loads[k])

    def __iter__(self) -> Iterator[Blocker]:
        for r, t_s, m, load in zip(self.running, self.ends, self.masks, self.loads, strict=True):
            job = r.job
            yield Blocker(t_s, m, job.queue, job.flavor, r.gpus, load)


# More nodes than this touched in one cycle are merged by sorting all events again rather
# than moved one by one (each move shifts the tail of a list of 73,500).
_MOVE_AT_MOST = 256

Claim = tuple[float, Masks]  # a running job's estimated end and GPUs
Change = tuple[str, Claim | None, Claim | None]  # job id, claim before, after


def node_events(ends: dict[str, float], gpus: dict[str, int]) -> tuple[tuple[float, int], ...]:
    """`reserve._node_events` with `never` of one node's claims (job id -> end, and job id
    -> GPUs, the same keys in the same order), all of them busy: each GPU comes free at the
    end of the latest claim that holds it (inf: never), by time. A tuple, which the garbage
    collector stops scanning (12,544 lists kept did not). Running jobs' claims never share
    a GPU (the booking refuses it): where none do and none is empty, each claim is an event
    of its own, the claims sorted (in C: 12,544 nodes on a start at 100,352 GPUs)."""
    held = gpus.values()
    if 0 not in held and sum(map(int.bit_count, held)) == reduce(or_, held, 0).bit_count():
        return tuple(sorted(zip(ends.values(), held, strict=True)))
    assigned, out = 0, []
    for t_s, m in sorted(zip(ends.values(), gpus.values(), strict=True), reverse=True):
        new = m & ~assigned
        assigned |= m
        if new:
            out.append((t_s, new))
    return tuple(reversed(out))


class _Flavor:
    """One flavor's claims per node and their events: node -> job id -> end, and node -> job
    id -> GPUs (two dicts of numbers, which the garbage collector does not track, rather than
    a tuple per claim: 73,500 on a start at 100,352 GPUs)."""

    def __init__(self) -> None:
        self.ends: dict[int, dict[str, float]] = {}
        self.gpus: dict[int, dict[str, int]] = {}
        self.events = BaseEvents({}, [])


class KeptEvents:
    """The release events of the running jobs booked on one index, per flavor asked for.
    `of` reads the blockers of the cycle (`Booking.blockers`) and moves what it kept by
    those that differ from the last ones it saw."""

    def __init__(self, topo: Topology) -> None:
        self._topo = topo
        self._flavors: dict[str, _Flavor] = {}
        self._seen: RunningBlockers | None = None  # the last blockers seen (never changed)

    def of(self, flavor: str, blockers: RunningBlockers) -> BaseEvents:
        """The `BaseEvents` of `blockers` for `flavor`."""
        if blockers is not self._seen:
            if self._flavors:
                changes = self._changes(blockers)
                for name, each in self._flavors.items():
                    self._move(name, each, changes)
            self._seen = blockers
        kept = self._flavors.get(flavor)
        if kept is None:
            kept = self._flavors[flavor] = self._build(flavor, blockers)
        return kept.events

    def _build(self, flavor: str, blockers: RunningBlockers) -> _Flavor:
        """A flavor's claims and events from nothing (a start, a flavor new to a reservation)."""
        # whether each node counts (ready, of the flavor): one list read per claim
        topo = self._topo
        ok = [up and f == flavor for up, f in zip(topo.ready, topo.flavor, strict=True)]
        out = _Flavor()
        ends, gpus = out.ends, out.gpus
        for r, t_s, masks in zip(blockers.running, blockers.ends, blockers.masks, strict=True):
            job_id = r.id  # every running job once
            for i, m in masks.items():
                if ok[i]:
                    here = ends.get(i)
                    if here is None:
                        ends[i] = {job_id: t_s}
                        gpus[i] = {job_id: m}
                    else:
                        here[job_id] = t_s
                        gpus[i][job_id] = m
        per_node: dict[int, Sequence[tuple[float, int]]] = {
            i: node_events(here, gpus[i]) for i, here in ends.items()
        }
        out.events = BaseEvents(per_node, all_ordered(per_node))
        return out

    def _changes(self, blockers: RunningBlockers) -> list[Change]:
        """Claims new, ended or changed (end, GPUs) since the last blockers seen."""
        out: list[Change] = []
        seen = self._seen
        assert seen is not None  # a flavor kept has seen blockers
        ends, masks, was_ends, was_masks = blockers.ends, blockers.masks, seen.ends, seen.masks
        if blockers.running is seen.running and masks is was_masks:  # only ends may differ
            running = blockers.running
            for k in compress(range(len(ends)), map(ne, ends, was_ends)):
                out.append((running[k].id, (was_ends[k], masks[k]), (ends[k], masks[k])))
            return out
        last = {r.id: k for k, r in enumerate(seen.running)}
        found = 0
        for r, t_s, m in zip(blockers.running, ends, masks, strict=True):
            at = last.get(r.id)
            if at is None:
                out.append((r.id, None, (t_s, m)))
                continue
            found += 1
            if was_ends[at] != t_s or was_masks[at] is not m:
                out.append((r.id, (was_ends[at], was_masks[at]), (t_s, m)))
        if found < len(last):  # some ended
            now = {r.id for r in blockers.running}
            out += [(i, (was_ends[k], was_masks[k]), None) for i, k in last.items() if i not in now]
        return out

    def _move(self, flavor: str, kept: _Flavor, changes: list[Change]) -> None:
        ready, node_flavor = self._topo.ready, self._topo.flavor
        ends, gpus, touched = kept.ends, kept.gpus, set()
        for job_id, before, after in changes:
            for i in before[1] if before is not None else ():
                if ready[i] and node_flavor[i] == flavor:
                    del ends[i][job_id], gpus[i][job_id]
                    touched.add(i)
            if after is not None:
                t_s, masks = after
                for i, m in masks.items():
                    if ready[i] and node_flavor[i] == flavor:
                        here = ends.get(i)
                        if here is None:
                            here = ends[i] = {}
                            gpus[i] = {}
                        here[job_id] = t_s
                        gpus[i][job_id] = m
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
            here = ends.get(i)
            if here:
                events = per_node[i] = node_events(here, gpus[i])
                if move:
                    for t_s, m in events:
                        if t_s < math.inf:
                            insort(ordered, (t_s, i, m))
            else:
                ends.pop(i, None)
                gpus.pop(i, None)
                per_node.pop(i, None)
        if not move:
            ordered[:] = all_ordered(per_node)


__all__ = ["KeptEvents", "RunningBlockers", "node_events"]
