"""What a driver keeps between cycles: inventory indexes, the running jobs' booking and the
pending jobs in arrival order.

A cycle needs each running job's GPUs as masks per node, the cores and memory it holds, and
its GPUs counted against its queue's quota. Between two cycles only a few jobs start or
end, so rebuilding all of it is waste: at 16,384 GPUs with 12,000 jobs running it was a
fifth of a cycle. `Booking` keeps the last cycle's booking and applies the difference, as
Kueue's cache and KAI's snapshot keep the cluster's state alive between cycles and apply
only the events since. A cycle without a `CycleCache` books from nothing with the same code,
so it decides exactly the same.

`PendingOrder` does the same for the queue: the pending jobs sorted by arrival (submit time,
then number) change by a few jobs a cycle, and every ordering policy's order is that one
re-sorted by a rank (a stable sort), so it is kept and moved rather than sorted again.
`RankedOrder` keeps that re-sorted line too where the rank reads only the job (time
slicing's level, a priority), moved by the same jobs.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Sequence
from itertools import compress, repeat
from operator import attrgetter, le, not_
from typing import Any

from railyard.sched.classes import KeptGroups, Signals, signals_of
from railyard.sched.events import KeptEvents, RunningBlockers
from railyard.sched.model import Job, Node, RunningJob
from railyard.sched.snapshot import Load, Masks, Shape, Snapshot, Topology

_ID = attrgetter("id")


def _books_alike(a: RunningJob, b: RunningJob) -> bool:
    """Whether `b` books what `a` did: the same GPUs and the same job shape and queue (a new
    object for a job whose stop was asked, or whose checkpoint moved, books nothing new)."""
    ja, jb = a.job, b.job
    same_job = ja is jb or ja.alike is jb.alike or ja.alike == jb.alike
    return same_job and (a.placement is b.placement or a.placement == b.placement)


class Booking:
    """Running jobs booked on one inventory index: used GPUs per node, free cores and memory
    per node, GPUs per (queue, flavor), and each job's masks and load. `update` brings it to a
    new set of running jobs by removing those gone or changed and adding the new ones."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        # job id -> the running job booked; its masks, load and GPUs booked are in the
        # dicts below (no object per job: 73,500 of them made a start's cycle run the
        # garbage collector's full pass over the whole heap once more)
        self.entries: dict[str, RunningJob] = {}
        self.gpus: dict[str, int] = {}
        self.used = [0] * len(topo.nodes)
        self.free_cpu = list(topo.cpu_cap)
        self.free_mem = list(topo.mem_cap)
        self.usage: dict[tuple[str, str], int] = {}
        self.run_masks: dict[str, Masks] = {}
        self.run_loads: dict[str, Load] = {}
        self.running: tuple[RunningJob, ...] = ()  # sorted by id
        # the tuple last booked (a cycle's `ClusterState.running`): a tuple of frozen jobs,
        # so the same one again books the same (a walk over 73,500 jobs spared)
        self._given: Sequence[RunningJob] | None = None
        self._ends: dict[str, float] = {}  # estimated ends that move with nothing
        self._ends_t_s = -math.inf
        # `running`'s GPUs and loads in its order, for the blockers (made once per change)
        self._columns: tuple[Sequence[RunningJob], list[Masks], list[Load | None]] = ((), [], [])
        self._ids: list[str] = []  # `running`'s ids, in its order, made with the columns
        self.events = KeptEvents(topo)  # the blockers' GPU release events, per flavor
        # the last snapshot made of the booking (never handed out: copies are) and the
        # nodes booked or freed since, which a copy of it moves
        self._base: Snapshot | None = None
        self._moved: set[int] = set()

    def update(self, running: Sequence[RunningJob]) -> None:
        """Book exactly `running`. Raises ValueError if two of them hold one GPU or a job is
        listed twice; the booking is then unusable (the caller drops it)."""
        if running is self._given:  # the tuple booked last: the same jobs, each unchanged
            return
        self._given = None  # until booked
        entries = self.entries
        fresh: list[RunningJob] = []
        kept = 0
        if entries:
            for r in running:  # the common case, an unchanged object, costs a lookup
                if entries.get(r.id) is r:
                    kept += 1
                else:
                    fresh.append(r)
        else:  # a start: every job new (73,500 lookups spared)
            fresh = list(running)
        if not fresh and kept == len(entries) == len(running):
            self._given = running if isinstance(running, tuple) else None
            return
        ids = {r.id for r in running}
        if len(ids) != len(running):
            seen: set[str] = set()
            for r in running:
                if r.id in seen:
                    raise ValueError(f"job {r.id} is listed twice as running")
                seen.add(r.id)
        for job_id in [i for i in entries if i not in ids]:
            self._remove(job_id)
        added: list[RunningJob] = [] if entries else fresh  # a start: none booked before
        for r in fresh if entries else ():
            old = entries.get(r.id)
            if old is not None and _books_alike(old, r):
                entries[r.id] = r
                self._ends.pop(r.id, None)  # a new start of its time limit, maybe
                continue
            if old is not None:
                self._remove(r.id)
            added.append(r)
        ordered = sorted(running, key=_ID)
        self._add_all(ordered if len(added) == len(ordered) else sorted(added, key=_ID))
        self.running = tuple(ordered)
        self._given = running if isinstance(running, tuple) else None

    def _add_all(self, added: list[RunningJob]) -> None:
        """Book each of `added`, in order. `Topology.masks` and the GPU count inline, one
        loop, what it reads bound outside it: 73,500 jobs on a start at 100,352 GPUs."""
        topo = self.topo
        index, full, used, usage = topo.index, topo.full_mask, self.used, self.usage
        free_cpu, free_mem, run_loads = self.free_cpu, self.free_mem, self.run_loads
        run_masks, gpus_of, entries = self.run_masks, self.gpus, self.entries
        bits_of: dict[tuple[int, ...], int] = {}  # a node's GPUs -> their mask (few kinds)
        moved = self._moved if self._base is not None else None  # a start: none to move
        for r in added:
            masks: Masks = {}
            gpus = 0
            for name, on in r.placement.items():
                i = index.get(name)
                if i is not None:
                    try:
                        bits = bits_of.get(on)
                    except TypeError:  # a list, not the tuple `Placement` says: not kept
                        bits = None
                    if bits is None:
                        bits = 0
                        for g in on:
                            bits |= 1 << g
                        bits_of[tuple(on)] = bits
                    m = bits & full[i]
                    masks[i] = m
                    gpus += m.bit_count()
                    u = used[i]  # booked here, in the same loop: a raise leaves the
                    if u & m:  # booking unusable all the same
                        raise ValueError(f"GPU double-booked on node {topo.nodes[i].name}")
                    used[i] = u | m
            load = None
            job = r.job
            if job.cpus_per_worker or job.mem_per_worker_gb:
                load = Shape.of(job).load(masks)
            job_id = r.id
            if moved is not None:
                moved.update(masks)  # its cores and memory are on these nodes too
            if load:
                run_loads[job_id] = load
                for i, (cores, mib) in load.items():
                    free_cpu[i] -= cores
                    free_mem[i] -= mib
            if gpus:  # a CPU-only job charges no GPUs: `usage` holds only counts above zero
                charge = (job.queue, job.flavor)
                usage[charge] = usage.get(charge, 0) + gpus
            run_masks[job_id] = masks
            gpus_of[job_id] = gpus
            entries[job_id] = r

    def _remove(self, job_id: str) -> None:
        job = self.entries.pop(job_id).job  # its queue and flavor are the booked one's
        masks = self.run_masks.pop(job_id)
        self._moved.update(masks)  # its cores and memory are on these nodes too
        for i, m in masks.items():
            self.used[i] &= ~m
        load = self.run_loads.pop(job_id, None)
        if load:
            for i, (cores, mib) in load.items():
                self.free_cpu[i] += cores
                self.free_mem[i] += mib
        gpus = self.gpus.pop(job_id)
        if gpus:
            charge = (job.queue, job.flavor)
            left = self.usage[charge] - gpus
            if left:
                self.usage[charge] = left
            else:
                del self.usage[charge]
        self._ends.pop(job_id, None)

    def snapshot(self) -> Snapshot:
        """The free GPUs, cores and memory as a new snapshot a cycle may change: a copy of
        the last one moved by the nodes booked or freed since (a cycle's few starts and
        ends), not its buckets and histograms rebuilt over every node (12,544 at 100,352
        GPUs). The same snapshot as one made afresh (tests compare them)."""
        topo = self.topo
        free_mask = [full & ~u for full, u in zip(topo.full_mask, self.used, strict=True)]
        base = self._base
        if base is None:
            base = Snapshot(topo, free_mask, self.free_cpu, self.free_mem)
        elif self._moved:
            base = base.moved(free_mask, sorted(self._moved), self.free_cpu, self.free_mem)
        self._base, self._moved = base, set()
        return base.moved(free_mask, (), self.free_cpu, self.free_mem)

    def blockers(
        self,
        now_t_s: float,
        end_t_s: Callable[[RunningJob, float], float],
        ends_of: Callable[[Sequence[RunningJob], float], tuple[list[float], list[bool]]]
        | None = None,
    ) -> RunningBlockers:
        """Each running job as a reservation's blocker (its estimated end and what it holds),
        in id order. A job under its own time limit, which began counting already, ends at a
        time that moves with nothing else: its end is kept until then, so a cycle derives
        only the new jobs' and those without a limit of their own (history may move them).
        `ends_of`: `end_t_s` of many jobs at once (a start's 73,500), where there is one, and
        whether each is so kept (`Estimates.running_ends_fixed_t_s`)."""
        if now_t_s < self._ends_t_s:  # a clock set back: what was kept may not hold
            self._ends.clear()
        self._ends_t_s = now_t_s
        running = self.running
        if self._columns[0] is not running:
            ids = [r.id for r in running]  # a comprehension reads a slot faster than attrgetter
            masks, loads = self.run_masks, self.run_loads
            self._columns = (
                running, list(map(masks.__getitem__, ids)), list(map(loads.get, ids))
            )  # fmt: skip
            self._ids = ids
        ids = self._ids
        kept = self._ends
        ends: list[float] = []
        stale: Sequence[int] = range(len(ids))  # none kept (a start): every end derived
        if kept:  # in C, 73,500 of them: each kept end (-inf where none), those not after now
            ends = list(map(kept.get, ids, repeat(-math.inf)))
            stale = list(compress(range(len(ends)), map(le, ends, repeat(now_t_s))))
        if ends_of is None:
            runs = [running[k] for k in stale]
            fresh = [end_t_s(r, now_t_s) for r in runs]
            fixed = [_fixed(r, now_t_s) for r in runs]
        elif len(stale) == len(running):  # a start: every end, in one call
            fresh, fixed = ends_of(running, now_t_s)
        else:
            fresh, fixed = ends_of([running[k] for k in stale], now_t_s)
        if len(stale) == len(running):
            ends = list(fresh)
            stale_ids = ids
        else:
            for k, t_s in zip(stale, fresh, strict=True):
                ends[k] = t_s
            stale_ids = [ids[k] for k in stale]
        # kept: each fixed end (until it passes); the others forgotten
        if kept:  # those no longer fixed forgotten (none kept on a start: nothing to drop)
            for job_id in compress(stale_ids, map(not_, fixed)):
                kept.pop(job_id, None)
        kept.update(zip(compress(stale_ids, fixed), compress(fresh, fixed), strict=True))
        columns = self._columns
        return RunningBlockers(running, ends, columns[1], columns[2])


def _fixed(r: RunningJob, now_t_s: float) -> bool:
    """Whether a running job's end is fixed until it passes: under its own limit, counting."""
    limit_s, from_t_s = r.job.walltime_s, r.limit_from_t_s
    return limit_s is not None and from_t_s <= now_t_s < from_t_s + limit_s


def by_arrival(job: Job) -> tuple[float, tuple[int, str, int, str]]:
    """Arrival order: submit time, then number (`Job.tie`)."""
    return job.submit_t_s, job.tie


# More new jobs than this in one cycle are sorted in with the rest rather than put in place
# one by one (each insertion moves the list's tail).
_INSERT_AT_MOST = 64


def _put_in(jobs: list[Job], fresh: list[Job], key: Callable[[Job], Any]) -> None:
    """Put `fresh` into `jobs`, sorted by `key`: one by one for a few, sorted in for more."""
    if len(fresh) > _INSERT_AT_MOST:
        jobs += fresh
        jobs.sort(key=key)
    else:
        for j in fresh:
            insort(jobs, j, key=key)


class PendingOrder:
    """The pending jobs sorted by arrival, moved between cycles by the jobs that came, left or
    changed (a changed job is a new object: the driver replaces, never mutates, a job)."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []
        self._by_id: dict[str, Job] = {}
        self.pairs: dict[tuple[str, str], int] = {}
        """(queue, user) -> pending jobs: whose shares fair share ranks, without a pass over
        10,000 jobs to find them."""
        self.version = 0
        """Counts the changes of `jobs`; `change` is the last one, (jobs gone, jobs new), or
        None when it is not known (`jobs` was started again)."""
        self.change: tuple[list[Job], list[Job]] | None = None
        self._given: Sequence[Job] | None = None  # the tuple last sorted (a cycle's pending)

    def update(self, pending: Sequence[Job]) -> list[Job]:
        """`pending` sorted by arrival (the list is the cache's own: copy it to change it).
        With one id twice nothing is kept (`pairs` is then empty: fair share reads them off
        the jobs, and the list returned is not `jobs`)."""
        if pending is self._given:  # the tuple last seen (frozen jobs): nothing moved
            return self.jobs
        by_id = self._by_id
        fresh = [j for j in pending if by_id.get(j.id) is not j]
        if not fresh and len(pending) == len(by_id):
            self._given = pending if isinstance(pending, tuple) else None
            return self.jobs
        self._given = None
        self.version += 1
        now = {j.id: j for j in pending}
        if len(now) != len(pending):  # one id twice: nothing to key on; keep nothing
            self.jobs, self._by_id, self.pairs, self.change = [], {}, {}, None
            return sorted(pending, key=by_arrival)
        kept, gone = [], []
        for j in self.jobs:
            if now.get(j.id) is j:
                kept.append(j)
            else:
                gone.append(j)
                self._count(j, -1)
        for j in fresh:
            self._count(j, 1)
        _put_in(kept, fresh, by_arrival)
        self.jobs, self._by_id, self.change = kept, now, (gone, fresh)
        self._given = pending if isinstance(pending, tuple) else None
        return kept

    def _count(self, job: Job, change: int) -> None:
        pair = (job.queue, job.user)
        left = self.pairs.get(pair, 0) + change
        if left:
            self.pairs[pair] = left
        else:
            del self.pairs[pair]


class RankedOrder:
    """The pending jobs sorted by a rank that reads nothing of a cycle but the job and a few
    knobs (`kept_rank`: time slicing's level, a priority), then by arrival: moved between
    cycles by the jobs `PendingOrder` saw leave and come, while those knobs (the key) stay
    the same. A cycle then ranks and places only its new jobs, instead of looking up 10,000
    ranks and sorting by them again (a sixth of a time-sliced cycle)."""

    def __init__(self) -> None:
        self._key: Hashable = None
        self._version = -1
        self._rank: dict[str, int] = {}
        self.jobs: list[Job] = []

    def of(self, pending: PendingOrder, key: Hashable, rank: Callable[[Job], int]) -> list[Job]:
        """`pending.jobs` sorted by `rank`, then arrival (the list is the cache's own)."""
        if key == self._key and self._version == pending.version:
            return self.jobs
        change, moves = pending.change, key == self._key and self._version == pending.version - 1
        self._key = None  # until ranked
        if not (moves and change is not None and self._move(*change, rank)):
            # new knobs, changes not seen, or a job not where its rank says: rank them all
            ranks = self._rank = {j.id: rank(j) for j in pending.jobs}
            self.jobs = sorted(pending.jobs, key=lambda j: ranks[j.id])
        self._key, self._version = key, pending.version
        return self.jobs

    def _move(self, gone: list[Job], fresh: list[Job], rank: Callable[[Job], int]) -> bool:
        """Take out the jobs gone, put in the new ones; False when a job gone was not found
        (then nothing kept is to be trusted)."""
        ranks, jobs = self._rank, self.jobs

        def order(j: Job) -> tuple[int, float, tuple[int, str, int, str]]:
            return ranks[j.id], j.submit_t_s, j.tie

        if len(gone) > _INSERT_AT_MOST:
            ids = {id(j) for j in gone}
            kept = [j for j in jobs if id(j) not in ids]
            if len(kept) != len(jobs) - len(ids):
                return False
            jobs = kept
        else:
            for j in gone:
                at = bisect_left(jobs, order(j), key=order)
                if at == len(jobs) or jobs[at] is not j:
                    return False
                del jobs[at]
        for j in gone:
            ranks.pop(j.id, None)
        for j in fresh:
            ranks[j.id] = rank(j)
        _put_in(jobs, fresh, order)
        self.jobs = jobs
        return True


class ClassMemo:
    """Running jobs' victim classes kept between cycles, each until the time its policy says
    it may change (`victim_class_until`), for one set of the policy's knobs (the key); a
    clock set back or new knobs forget them all."""

    def __init__(self) -> None:
        self._key: Hashable = None
        self._t_s = -math.inf
        self.of: dict[str, tuple[RunningJob, Hashable, float]] = {}
        self.groups = KeptGroups()  # the groups themselves, moved by what changed
        self._signals: tuple[Sequence[RunningJob], Signals] | None = None

    def signals(self, running: Sequence[RunningJob]) -> Signals:
        """`classes.signals_of(running)`, kept while `running` is the same tuple (of frozen
        jobs: the booking's, the same object while no job started, ended or changed)."""
        kept = self._signals
        if kept is None or kept[0] is not running or not isinstance(running, tuple):
            kept = self._signals = (running, signals_of(running))
        return kept[1]

    def table(
        self, key: Hashable, now_t_s: float, running: int
    ) -> dict[str, tuple[RunningJob, Hashable, float]]:
        """job id -> (the running job it was judged for, its class, valid before this time)."""
        if key != self._key or now_t_s < self._t_s or len(self.of) > 2 * running + 1024:
            self._key, self.of = key, {}
        self._t_s = now_t_s
        return self.of


class CycleCache:
    """What a driver keeps between cycles to make the next one cheaper: the index of recent
    inventories (rebuilt only when a node changes state) with their memos, the booking of the
    running jobs on the latest, the pending jobs in arrival order and in kept-rank order, and
    kept victim classes. Owned by one driver (a simulation, a control loop: one thread); a
    cycle without one builds everything afresh and decides exactly the same."""

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self._recent: list[tuple[tuple[Node, ...], Topology]] = []
        self._booking: Booking | None = None
        self.pending = PendingOrder()
        self.ranked = RankedOrder()
        self.classes = ClassMemo()

    def topology(self, nodes: Sequence[Node]) -> Topology:
        key = tuple(nodes)
        for cached_nodes, topo in self._recent:
            if cached_nodes is key or cached_nodes == key:
                return topo
        topo = Topology(key)
        for _, other in self._recent:
            if other.static.key == topo.static.key:
                topo.static = other.static  # same nodes, other states: share what is static
                break
        self._recent = [(key, topo), *self._recent[: self.keep - 1]]
        return topo

    def booking(self, topo: Topology, running: Sequence[RunningJob]) -> Booking:
        """The running jobs booked on `topo`: the last cycle's booking moved to `running`, or
        a new one where the index changed (a node went down or came back)."""
        booking = self._booking
        if booking is None or booking.topo is not topo:
            booking = Booking(topo)
        self._booking = None  # until the update succeeds
        booking.update(running)
        self._booking = booking
        return booking


__all__ = ["Booking", "ClassMemo", "CycleCache", "PendingOrder", "RankedOrder", "by_arrival"]
