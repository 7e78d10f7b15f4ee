"""Choosing the cheapest victim set that actually makes room for a preemptor.

A victim frees its GPUs, quota, cores and memory. Cost, compared as a tuple: any non-spot
victim, GPU-seconds an eviction throws away (the work since the victim's last checkpoint
plus its restart, `SchedulerConfig.restart_cost_s` on each of its GPUs), number of victims,
then younger first.
Every candidate set is tried as a reversible what-if (`with snap.without(...)`), so a set is
only chosen if the preemptor then passes admission *and* placement. Small candidate pools
are searched exhaustively, larger ones greedily with a pruning pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import combinations

from railyard.sched.candidate import BY_COST, USEFUL, Candidate
from railyard.sched.model import Job, RunningJob
from railyard.sched.quota import QuotaTree
from railyard.sched.snapshot import Load, Masks, Shape, Snapshot, Topology


def set_cost(victims: Sequence[Candidate]) -> tuple[int, float, int, float]:
    """Spot-only sets first, then least work thrown away (lost and restart), fewer victims,
    younger victims."""
    return (
        max(c.cost[0] for c in victims),
        sum(c.cost[1] for c in victims),
        len(victims),
        -sum(c.run.start_t_s for c in victims),
    )


@contextmanager
def removed(
    snap: Snapshot,
    quota: QuotaTree,
    victims: Sequence[RunningJob | Candidate],
    masks: Sequence[Masks],
    loads: Sequence[Load] = (),
) -> Iterator[None]:
    """What-if: the victims' GPUs, quota, cores and memory are free inside the block."""
    jobs = [v.run.job if isinstance(v, Candidate) else v.job for v in victims]
    gpus = [sum(m.bit_count() for m in ms.values()) for ms in masks]
    for j, g in zip(jobs, gpus, strict=True):
        quota.remove(j.queue, j.flavor, g)
    try:
        with snap.without(masks, loads):
            yield
    finally:
        for j, g in zip(jobs, gpus, strict=True):
            quota.add(j.queue, j.flavor, g)


Fits = Callable[[], Masks | None]
_PRUNE_MAX = 64  # victims (dearest first) the greedy pass tries to keep back


def find_victims(
    job: Job,
    candidates: Sequence[Candidate],
    snap: Snapshot,
    quota: QuotaTree,
    fits: Fits,
    exact_max: int,
    quota_fits: bool = False,
    by_node: ByNode | None = None,
    useful_total: int | None = None,
) -> tuple[list[Candidate], Masks] | None:
    """The cheapest candidate subset after whose removal `fits()` finds GPUs, if any.

    `quota_fits`: the job already passes admission, so evictions (which only free quota)
    need not be booked in the quota tree during the greedy search. `by_node`: the pass's
    index of candidates by node (made here if None). `useful_total`: the candidates' useful
    GPUs summed, where the caller has summed them (a one-node search reads nothing else of
    all 11,400 of a time-slicing pass at 100,352 GPUs).
    """
    short = job.gpus - snap.flavor_free.get(job.flavor, 0)
    if useful_total is None:
        useful_total = sum(map(_USEFUL, candidates))
    if not candidates or useful_total < short:
        return None
    if len(candidates) <= exact_max:
        return _exhaustive(candidates, list(map(_USEFUL, candidates)), short, snap, quota, fits)
    shape = Shape.of(job)
    if shape.gpus <= snap.topo.max_gpus.get(shape.flavor, 0):
        found = _one_node(shape, candidates, snap, quota, fits, by_node)
        if found is not None:
            return found
    if not _may_fit_without(shape, candidates, snap):
        return None  # not even with every candidate gone: spare evicting them one by one
    greedy_quota = None if quota_fits else quota
    useful = list(map(_USEFUL, candidates))
    return _greedy(candidates, useful, short, shape, snap, greedy_quota, fits, by_node)


def _may_fit_without(shape: Shape, candidates: Sequence[Candidate], snap: Snapshot) -> bool:
    """`snap.may_fit(shape)` as it would answer with every candidate evicted, counted
    without evicting any: placement needs it, so when it fails the greedy search (which
    would evict them all, hundreds of snapshot updates, and find nothing) cannot succeed.
    A gang of 32 over 300 one-GPU candidates on full nodes is the common case."""
    topo, flavor = snap.topo, shape.flavor
    buckets = snap.buckets.get(flavor)
    if buckets is None:
        return False
    if shape.gpus_per_worker == 0:
        return True
    after: dict[int, int] = {}  # free GPUs of the touched nodes, the candidates gone
    ready, node_flavor, free = topo.ready, topo.flavor, snap.free
    for c in candidates:  # some 13,000 under time slicing: what it reads is bound outside
        for i, m in c.masks.items():
            if ready[i] and node_flavor[i] == flavor:
                have = after.get(i)
                after[i] = (free[i] if have is None else have) + m.bit_count()
    per = [shape.workers_on(free) for free in range(len(buckets))]  # by free GPUs
    capacity = sum(len(nodes) * per[free] for free, nodes in enumerate(buckets))
    was = snap.free
    capacity += sum(per[free] - per[was[i]] for i, free in after.items())
    return capacity >= shape.workers


class ByNode:
    """A pass's candidates by node, cheapest first, sorted once and shared by its searches.

    Time slicing searches for up to 16 jobs a cycle over the same 13,000 candidates (at
    100,352 GPUs); each search sorting them by node afresh was a third of a cycle. A search
    reads the candidates it was given (`of`) and skips the others: a candidate's cost, masks
    and the nodes' readiness are fixed within a pass. Holds every candidate it indexed, so
    their `id`s stay theirs."""

    __slots__ = ("_here", "_ids", "_known", "_nodes", "_order", "_sorted", "_topo")

    def __init__(self, topo: Topology) -> None:
        self._topo = topo
        self._known: dict[int, Candidate] = {}
        self._ids: set[int] = set()  # `_known`'s keys as a set: a subset test each search
        # (node, candidate), cheapest first, as two lists: no tuple per entry (13,000 a
        # time-slicing pass that lived through it, for the garbage collector to scan)
        self._nodes: list[int] = []
        self._order: list[Candidate] = []
        self._here: dict[int, list[Candidate]] = {}
        self._sorted: list[Candidate] = []  # every candidate indexed, cheapest first

    def of(self, candidates: Sequence[Candidate]) -> set[int]:
        """The `id`s of `candidates`, indexed first if any is new to this index."""
        ids = set(map(id, candidates))
        if not ids <= self._ids:
            self._known.update(zip(map(id, candidates), candidates, strict=True))
            self._ids |= ids
            ready = self._topo.ready
            # by cost, then node: a candidate's cost is unique among those one search reads
            # (its id comes last), and one on several nodes is on each, in node order
            nodes: list[int] = []
            order: list[Candidate] = []
            self._sorted = sorted(self._known.values(), key=_BY_COST)
            for c in self._sorted:
                masks = c.masks
                for i in masks if len(masks) == 1 else sorted(masks):
                    if ready[i]:
                        nodes.append(i)
                        order.append(c)
            self._nodes, self._order = nodes, order
            here: dict[int, list[Candidate]] = {}
            for i, c in zip(nodes, order, strict=True):
                at = here.get(i)
                if at is None:
                    here[i] = [c]
                else:
                    at.append(c)
            self._here = here
        return ids

    def ranked(self, candidates: Sequence[Candidate]) -> list[int]:
        """The positions in `candidates` by cost, cheapest first: `sorted(range(n), key=cost)`
        read off the one sort of the pass (a gang's greedy search sorted the 11,400 victims
        of a time-slicing pass at 100,352 GPUs afresh: costs are unique in one search)."""
        self.of(candidates)
        at = {id(c): k for k, c in enumerate(candidates)}
        get = at.get
        return [k for k in map(get, map(id, self._sorted)) if k is not None]

    def walk(self, ids: set[int], flavor: str) -> Iterator[tuple[int, list[Candidate]]]:
        """Nodes of `flavor` by their cheapest candidate among `ids` (then by index), each
        with its candidates among `ids`, cheapest first."""
        seen: set[int] = set()
        node_flavor, here = self._topo.flavor, self._here
        for i, c in zip(self._nodes, self._order, strict=True):
            if i in seen or id(c) not in ids or node_flavor[i] != flavor:
                continue
            seen.add(i)
            yield i, [x for x in here[i] if id(x) in ids]


def _one_node(
    shape: Shape,
    candidates: Sequence[Candidate],
    snap: Snapshot,
    quota: QuotaTree,
    fits: Fits,
    by_node: ByNode | None = None,
) -> tuple[list[Candidate], Masks] | None:
    """For a gang that fits one node: on each node, the cheapest victims that free enough
    GPUs, cores and memory there (counting only, no what-ifs); the cheapest node is then
    confirmed by one what-if. None if that fails (quota, holds), so the general search can
    take over."""
    need = shape.gpus
    need_cpu = shape.workers * shape.cpus_per_worker
    need_mem = shape.workers * shape.mem_per_worker_mib
    if by_node is None:
        by_node = ByNode(snap.topo)
    ids = by_node.of(candidates)
    # Nodes by their cheapest candidate. No set on a node costs less than that candidate
    # alone (a set of it and others is dearer: lost time is never negative, and a second
    # victim counts), so once the best set found is cheaper than a node's cheapest
    # candidate, no later node can beat it: a 1-GPU preemptor looks at a node or two.
    best: tuple[tuple[int, float, int, float], int, list[Candidate]] | None = None
    for i, here in by_node.walk(ids, shape.flavor):
        if best is not None and best[0] < here[0].cost[:4]:
            break
        if need_cpu or need_mem:
            chosen = _cheapest_freeing(here, i, snap, need, need_cpu, need_mem)
        else:
            chosen = _cheapest_freeing_gpus(here, i, snap.free[i], need)
        if chosen and (best is None or (set_cost(chosen), i) < best[:2]):
            best = (set_cost(chosen), i, chosen)
    if best is None:
        return None
    victims = best[2]
    with removed(snap, quota, victims, *_claims(victims)):
        found = fits()
    return None if found is None else (victims, found)


_BY_COST, _USEFUL = BY_COST, USEFUL  # a victim's cost (its id last: no ties), useful GPUs


def _cheapest_freeing_gpus(
    here: Sequence[Candidate], i: int, free: int, need: int
) -> list[Candidate]:
    """The cheapest of `here` (cheapest first) that free `need` GPUs on node `i`, none kept
    that is not needed; empty if they cannot. (GPUs only: most gangs ask for nothing else,
    and this runs for every node of each search.)"""
    chosen: list[Candidate] = []
    for c in here:
        if free >= need:
            break
        chosen.append(c)
        free += c.masks[i].bit_count()
    if free < need:
        return []
    for c in reversed(chosen[:]):  # dearest first: keep back what is not needed
        frees = c.masks[i].bit_count()
        if free - frees >= need:
            chosen.remove(c)
            free -= frees
    return chosen


def _cheapest_freeing(
    here: Sequence[Candidate], i: int, snap: Snapshot, need: int, need_cpu: int, need_mem: int
) -> list[Candidate]:
    """As `_cheapest_freeing_gpus`, counting cores and memory too."""
    free = (snap.free[i], snap.free_cpu[i], snap.free_mem[i])
    chosen: list[Candidate] = []
    for c in here:
        if _enough(free, need, need_cpu, need_mem):
            break
        chosen.append(c)
        free = _plus(free, _frees(c, i))
    if not _enough(free, need, need_cpu, need_mem):
        return []
    for c in reversed(chosen[:]):
        less = _plus(free, _frees(c, i), -1)
        if _enough(less, need, need_cpu, need_mem):
            chosen.remove(c)
            free = less
    return chosen


def _frees(c: Candidate, i: int) -> tuple[int, int, int]:
    cores, mib = c.load.get(i, (0, 0)) if c.load else (0, 0)
    return c.masks[i].bit_count(), cores, mib


def _plus(a: tuple[int, int, int], b: tuple[int, int, int], sign: int = 1) -> tuple[int, int, int]:
    return a[0] + sign * b[0], a[1] + sign * b[1], a[2] + sign * b[2]


def _enough(free: tuple[int, int, int], gpus: int, cores: int, mib: int) -> bool:
    return free[0] >= gpus and free[1] >= cores and free[2] >= mib


def _exhaustive(
    candidates: Sequence[Candidate],
    useful: Sequence[int],
    short: int,
    snap: Snapshot,
    quota: QuotaTree,
    fits: Fits,
) -> tuple[list[Candidate], Masks] | None:
    every = range(len(candidates))
    subsets = [
        s for n in every for s in combinations(every, n + 1) if sum(useful[k] for k in s) >= short
    ]
    subsets.sort(key=lambda s: set_cost([candidates[k] for k in s]))
    for s in subsets:
        chosen = [candidates[k] for k in s]
        with removed(snap, quota, chosen, *_claims(chosen)):
            found = fits()
        if found is not None:
            return chosen, found
    return None


def _greedy(
    candidates: Sequence[Candidate],
    useful: Sequence[int],
    short: int,
    shape: Shape,
    snap: Snapshot,
    quota: QuotaTree | None,
    fits: Fits,
    by_node: ByNode | None = None,
) -> tuple[list[Candidate], Masks] | None:
    """Evict cheapest-first until the job fits, then keep back every victim not needed.

    Fit checks are spaced geometrically (the pruning pass removes any overshoot), so a big
    gang over many small victims costs O(log n) placements, not O(n). All steps are
    incremental on the snapshot and undone before returning.
    """
    if by_node is not None:  # the pass's order, shared by its searches
        ranked = by_node.ranked(candidates)
    else:
        ranked = sorted(range(len(candidates)), key=[c.cost for c in candidates].__getitem__)
    out: list[int] = []
    freed = 0
    found: Masks | None = None
    line = _Line(snap, shape)  # evictions counted, then put on the snapshot before `fits`
    try:
        check_at = short  # after a failed check, evict ~25% more before the next one
        for k in ranked:
            line.evict(candidates[k])
            out.append(k)
            freed += useful[k]
            if freed >= check_at and line.may_fit():
                line.flush(quota)
                if (found := fits()) is not None:
                    break
                check_at = max(freed + 1, freed * 5 // 4)
        line.flush(quota)
        if found is None and out:
            found = fits()
        if found is None:
            return None
        # Victims whose GPUs the placement does not use are only worth it for quota: try
        # keeping all of them at once before pruning one by one.
        idle = []
        for k in out:  # thousands of one-GPU victims for a gang: a loop, not a generator each
            for i, m in candidates[k].masks.items():
                if found.get(i, 0) & m:
                    break
            else:
                idle.append(k)
        _restore_all(snap, quota, [candidates[k] for k in idle])
        if idle and (again := fits()) is not None:
            kept = set(idle)
            out = [k for k in out if k not in kept]
            freed -= sum(useful[k] for k in idle)
            found = again
        else:
            _evict_all(snap, quota, [candidates[k] for k in idle])
        # `out` is in `ranked` order, cheapest first (costs are unique): its dearest, last
        for k in out[: -_PRUNE_MAX - 1 : -1]:
            _restore(snap, quota, candidates[k])
            if freed - useful[k] >= short and snap.may_fit(shape) and (again := fits()) is not None:
                out.remove(k)
                freed -= useful[k]
                found = again
            else:
                _evict(snap, quota, candidates[k])
        return [candidates[k] for k in out], found
    finally:
        _restore_all(snap, quota, [candidates[k] for k in out[: len(out) - len(line.waiting)]])


class _Line:
    """The greedy search's evictions: counted as they come (`Snapshot.may_fit`'s workers'
    worth of free GPUs per node, kept by hand) and put on the snapshot only before a
    placement reads it, all at once, each node once. A big gang over one-GPU victims
    evicts thousands of them, and updating the snapshot's aggregates for each was most of a
    time-slicing cycle at 100,352 GPUs (issue 56); the snapshot `fits` reads is the same."""

    def __init__(self, snap: Snapshot, shape: Shape) -> None:
        self.snap, self.shape = snap, shape
        self.waiting: list[Candidate] = []  # evicted, not yet put on the snapshot
        self.free: dict[int, int] = {}  # free GPUs of the nodes touched, evictions counted
        buckets = snap.buckets.get(shape.flavor)
        self.any_node = buckets is not None
        # workers a node holds, by its free GPUs (a ready node of the flavor has at most
        # as many as the largest, the buckets' last)
        self.per = [shape.workers_on(free) for free in range(len(buckets or ()))]
        self.capacity = sum(len(on) * self.per[free] for free, on in enumerate(buckets or ()))

    def evict(self, c: Candidate) -> None:
        self.waiting.append(c)
        snap, free, flavor = self.snap, self.free, self.shape.flavor
        ready, node_flavor, per = snap.topo.ready, snap.topo.flavor, self.per
        for i, m in c.masks.items():
            if ready[i] and node_flavor[i] == flavor:
                old = free.get(i)
                if old is None:
                    old = snap.free[i]
                new = free[i] = old + m.bit_count()
                self.capacity += per[new] - per[old]

    def may_fit(self) -> bool:
        """`snap.may_fit(shape)` as it would answer with the waiting evictions made."""
        gpw = self.shape.gpus_per_worker
        return self.any_node and (gpw == 0 or self.capacity >= self.shape.workers)

    def flush(self, quota: QuotaTree | None) -> None:
        _evict_all(self.snap, quota, self.waiting)
        self.waiting = []


def _merged(victims: Sequence[Candidate]) -> tuple[Masks, Load]:
    """The victims' GPUs and their cores and memory, per node (victims hold no GPU twice)."""
    masks: Masks = {}
    loads: Load = {}
    for c in victims:
        for i, m in c.masks.items():
            masks[i] = masks.get(i, 0) | m
        for i, (cores, mib) in c.load.items() if c.load else ():
            have = loads.get(i, (0, 0))
            loads[i] = (have[0] + cores, have[1] + mib)
    return masks, loads


def _evict_all(snap: Snapshot, quota: QuotaTree | None, victims: Sequence[Candidate]) -> None:
    """`_evict` of each victim, the snapshot moved once per node."""
    if quota is not None:
        for c in victims:
            quota.remove(c.run.job.queue, c.run.job.flavor, c.gpus)
    masks, loads = _merged(victims)
    snap.release(masks)
    snap.release_load(loads)


def _restore_all(snap: Snapshot, quota: QuotaTree | None, victims: Sequence[Candidate]) -> None:
    if quota is not None:
        for c in victims:
            quota.add(c.run.job.queue, c.run.job.flavor, c.gpus)
    masks, loads = _merged(victims)
    snap.take(masks)
    snap.take_load(loads)


def _claims(victims: Sequence[Candidate]) -> tuple[list[Masks], list[Load]]:
    return [c.masks for c in victims], [c.load for c in victims if c.load]


def _evict(snap: Snapshot, quota: QuotaTree | None, c: Candidate) -> None:
    if quota is not None:
        quota.remove(c.run.job.queue, c.run.job.flavor, c.gpus)
    snap.release(c.masks)
    if c.load:
        snap.release_load(c.load)


def _restore(snap: Snapshot, quota: QuotaTree | None, c: Candidate) -> None:
    if quota is not None:
        quota.add(c.run.job.queue, c.run.job.flavor, c.gpus)
    snap.take(c.masks)
    if c.load:
        snap.take_load(c.load)


__all__ = ["ByNode", "Candidate", "find_victims", "removed", "set_cost"]
