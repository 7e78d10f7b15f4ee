"""Running jobs grouped as victims: by flavor and by the class their preemption policy judges
them on (alike victims get one answer per preemptor, so a search asks once per class).

A driver may keep the classes between cycles (`KeptClasses`, `cache.ClassMemo`): a policy
that says until when a running job's class holds (`victim_class_until`: time slicing's class
moves with the quantum and with each service level crossed) has it judged again only then,
for the same knobs; without one, or for a policy without it, every class is judged afresh.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence, Set
from typing import Protocol

from railyard.sched.candidate import Candidate
from railyard.sched.decisions import PreemptReason
from railyard.sched.limits import min_runtime_bound_s, queue_time_limits
from railyard.sched.model import Queue, RunningJob
from railyard.sched.policies.registry import PreemptContext, PreemptionPolicy


class VictimClass:
    """Running jobs the policy judges alike as victims, with what each search of a pass
    reads of them made once: their ids, how many sizes they come in, and per reason their
    candidates (time slicing searches for up to 16 jobs a cycle over the same classes)."""

    __slots__ = ("ids", "left", "made", "members", "sizes")

    def __init__(self) -> None:
        self.members: list[RunningJob] = []
        self.ids: set[str] = set()
        self.sizes = 0
        self.made: dict[PreemptReason, list[Candidate]] = {}
        # per reason and sizes that do not evict back, those of `made` of those sizes not
        # yet signalled, and how many jobs the pass had signalled then (it only adds)
        self.left: dict[tuple[PreemptReason, tuple[int, ...]], tuple[int, list[Candidate]]] = {}

    def left_of(
        self,
        reason: PreemptReason,
        back: Mapping[int, bool],
        made: list[Candidate],
        signalled: Set[str],
        log: Sequence[str],
    ) -> list[Candidate]:
        """`made` (the members' candidates for `reason`, in order) less those of the sizes
        that would evict the preemptor back (`back`: size -> answer) and those signalled
        (`log`: `signalled` in the order the pass added to it, only ever longer). Kept per
        reason and sizes, and kept on while the jobs signalled since are none of this class's
        (a search signals a job or two, of one class or two of some 500: rebuilding each
        class that had lost one, each search, was a tenth of a time-slicing pass)."""
        kind = (reason, tuple(sorted(g for g, b in back.items() if not b)))
        left = self.left.get(kind)
        n = len(log)
        if left is not None and left[0] != n and self.ids.isdisjoint(log[left[0] :]):
            left = self.left[kind] = (n, left[1])
        if left is None or left[0] != n:
            kept = [
                c
                for c, r in zip(made, self.members, strict=True)
                if not back.get(r.gpus, True) and r.id not in signalled
            ]
            left = self.left[kind] = (n, kept)
        return left[1]


class KeptClasses(Protocol):
    """Where a driver keeps running jobs' victim classes between cycles (`cache.ClassMemo`),
    and the groups themselves (`groups`)."""

    groups: KeptGroups

    def table(
        self, key: Hashable, now_t_s: float, running: int
    ) -> dict[str, tuple[RunningJob, Hashable, float]]: ...

    def signals(self, running: Sequence[RunningJob]) -> Signals:
        """`signals_of(running)`, kept while `running` is the same tuple."""
        ...


Signals = tuple[list[str], list[RunningJob], list[RunningJob]]


def signals_of(running: Sequence[RunningJob]) -> Signals:
    """Of `running`, in order: the ids of those asked to stop, those stopping for a job (a
    preemption's handshake) and the preemptible ones that backfilled; one walk, not three."""
    stopping: list[str] = []
    asked: list[RunningJob] = []
    backfilled: list[RunningJob] = []
    for r in running:
        if r.stop_cause is not None:
            stopping.append(r.id)
        if r.preempt_for is not None:
            asked.append(r)
        if r.backfilled and r.job.preemptible:
            backfilled.append(r)
    return stopping, asked, backfilled


def class_key(policy: PreemptionPolicy, ctx: PreemptContext) -> Hashable:
    """Everything of the cycle a victim's class may read besides the job and the time: the
    policy, its knobs and the queues' time limits."""
    return (policy.name, ctx.priority_preemption_min, ctx.service_levels_gpu_s, ctx.quantum_s,
            ctx.time_slice_by, ctx.starvation_limit_s, ctx.starved_unsliced_s,
            ctx.promotion_wait_ratio, ctx.unsliced_after_s, ctx.unsliced_after_restarts,
            queue_time_limits(ctx.quota.queues))  # fmt: skip


def group_victims(
    running: Sequence[RunningJob],
    signalled: Set[str],
    policy: PreemptionPolicy,
    ctx: PreemptContext,
    kept_classes: KeptClasses | None = None,
) -> dict[str, dict[Hashable, VictimClass]]:
    """flavor -> class -> the running jobs (in `running`'s order) that may be evicted at all:
    not already asked to stop and past their minimum run time (capped by their queue)."""
    until_of = getattr(policy, "victim_class_until", None)
    if kept_classes is not None and until_of is not None:
        bounds_of = tuple(sorted((n, q.max_min_runtime_s) for n, q in ctx.quota.queues.items()))
        key = (class_key(policy, ctx), bounds_of)
        all_of = getattr(policy, "victim_classes_until", None)
        found = kept_classes.groups.of(running, signalled, key, ctx, until_of, all_of)
        if found is not None:
            return found
    out: dict[str, dict[Hashable, VictimClass]] = {}
    bounds: dict[str, float] = {}  # each queue's cap on a job's minimum run time
    now_t_s = ctx.now_t_s
    kept = None
    if kept_classes is not None and until_of is not None:
        kept = kept_classes.table(class_key(policy, ctx), now_t_s, len(running))
    victim_class = policy.victim_class
    for r in running:  # up to 73,500 jobs a pass: what the loop reads is bound outside it
        job_id = r.id
        if job_id in signalled:
            continue
        job = r.job
        name = job.queue
        bound = bounds.get(name)
        if bound is None:
            queue = ctx.quota.queues.get(name)
            bound = bounds[name] = min_runtime_bound_s(
                queue.max_min_runtime_s if queue is not None else None
            )
        if now_t_s - r.start_t_s < min(job.min_runtime_s, bound):
            continue
        if kept is None or until_of is None:
            cls = victim_class(r, ctx)
        else:  # a class kept from an earlier cycle while it cannot have changed
            hit = kept.get(job_id)
            if hit is not None and hit[0] is r and now_t_s < hit[2]:
                cls = hit[1]
            else:
                cls, until_t_s = until_of(r, ctx)
                kept[job_id] = (r, cls, until_t_s)
        by_class = out.get(job.flavor)
        if by_class is None:
            by_class = out[job.flavor] = {}
        group = by_class.get(cls)
        if group is None:
            group = by_class[cls] = VictimClass()
        group.members.append(r)
        group.ids.add(job_id)
    for by_class in out.values():
        for group in by_class.values():
            group.sizes = len({r.gpus for r in group.members})
    return out


# a policy's `victim_classes_until`: `victim_class_until` of many jobs at once, as columns
_AllOf = Callable[[Sequence[RunningJob], PreemptContext], tuple[list[Hashable], list[float]]]

_SLACK_S = 1.0  # a job is looked at again this long before its minimum run time is over


class _Members:
    """One class's members, by id, with how many of each size."""

    __slots__ = ("ids", "idset", "pair", "runs", "sizes")

    def __init__(self, pair: tuple[str, Hashable]) -> None:
        self.pair = pair  # (flavor, class)
        self.ids: list[str] = []
        self.runs: list[RunningJob] = []
        self.idset: set[str] = set()  # `ids` again, as a `VictimClass` reads them
        self.sizes: dict[int, int] = {}


class KeptGroups:
    """`group_victims`' groups kept between cycles (issue 56): moved by the running jobs that
    started, ended or changed, by the classes whose time is up (`victim_class_until`) and
    by the jobs whose minimum run time ended, instead of a walk over 73,500 running jobs a
    pass. The same knobs (the key) and a clock that only moves on, or it starts again."""

    def __init__(self) -> None:
        self._reset(None)

    def _reset(self, key: Hashable) -> None:
        self._key = key
        self._t_s = -math.inf
        self._running: Sequence[RunningJob] | None = None
        self._seen: dict[str, RunningJob] = {}
        # each job grouped: its group, and until when its class holds
        self._place: dict[str, _Members] = {}
        self._until: dict[str, float] = {}
        self._groups: dict[str, dict[Hashable, _Members]] = {}
        self._waiting: dict[str, RunningJob] = {}  # not yet past their minimum run time
        self._wakes: list[tuple[float, str]] = []  # (about when, id) of those waiting
        self._ends: list[tuple[float, str]] = []  # (until, id) of the classes judged
        self._bounds: dict[str, float] = {}
        # (flavor, class) -> its group, as `_groups` holds it: one lookup a job (73,500 on a
        # start), and no tuple kept per job for the garbage collector's full passes
        self._pairs: dict[tuple[str, Hashable], _Members] = {}

    def of(
        self,
        running: Sequence[RunningJob],
        signalled: Set[str],
        key: Hashable,
        ctx: PreemptContext,
        until_of: Callable[[RunningJob, PreemptContext], tuple[Hashable, float]],
        all_of: _AllOf | None = None,
    ) -> dict[str, dict[Hashable, VictimClass]] | None:
        """`group_victims` of `running` (sorted by id); None where a job is signalled that
        has not been asked to stop (a requeue: the caller then groups from nothing)."""
        now_t_s = ctx.now_t_s
        if key != self._key or now_t_s < self._t_s:
            self._reset(key)
        self._t_s = now_t_s
        if running is not self._running:
            self._move(running, ctx, until_of, all_of)
        seen = self._seen
        if any((r := seen.get(i)) is None or r.stop_cause is None for i in signalled):
            return None
        ended = []
        while self._ends and self._ends[0][0] <= now_t_s:  # classes whose time is up
            ended.append(heapq.heappop(self._ends))
        for until_t_s, job_id in ended:  # judged again once (until the next cycle, if the
            if self._until.get(job_id) == until_t_s:  # new class's time is up already)
                self._drop(job_id)
                self._admit(seen[job_id], ctx, until_of)
        woken = []
        while self._wakes and self._wakes[0][0] <= now_t_s + _SLACK_S:
            woken.append(heapq.heappop(self._wakes)[1])
        for job_id in woken:  # looked at again (exactly), waiting again if too early
            r = self._waiting.pop(job_id, None)
            if r is not None:
                self._admit(r, ctx, until_of)
        out: dict[str, dict[Hashable, VictimClass]] = {}
        for flavor, classes in sorted(
            self._groups.items(), key=lambda fc: min(m.ids[0] for m in fc[1].values())
        ):
            by_class = out[flavor] = {}
            for cls, members in sorted(classes.items(), key=lambda cm: cm[1].ids[0]):
                group = by_class[cls] = VictimClass()
                # the kept lists and set themselves, not copies: a pass only reads them,
                # and they move only in the next cycle's call (73,500 jobs copied a cycle)
                group.members = members.runs
                group.ids = members.idset
                group.sizes = len(members.sizes)
        return out

    def _move(
        self,
        running: Sequence[RunningJob],
        ctx: PreemptContext,
        until_of: Callable[[RunningJob, PreemptContext], tuple[Hashable, float]],
        all_of: _AllOf | None = None,
    ) -> None:
        """Bring the groups to `running`: drop the jobs gone or changed, admit the new."""
        seen = self._seen
        now = {r.id: r for r in running}
        if not seen:  # from nothing (a start, new knobs): every job new
            self._seen, self._running = now, running
            self._admit_all(running, ctx, until_of, all_of)
            return
        for job_id in seen.keys() - now.keys():
            self._drop(job_id)
        fresh = [r for r in running if seen.get(r.id) is not r]
        self._seen, self._running = now, running
        for r in fresh:
            self._drop(r.id)
            self._admit(r, ctx, until_of)

    def _admit(
        self,
        r: RunningJob,
        ctx: PreemptContext,
        until_of: Callable[[RunningJob, PreemptContext], tuple[Hashable, float]],
    ) -> None:
        """Group `r` if it may be evicted at all, or wait for its minimum run time's end."""
        job = r.job
        if r.stop_cause is not None:
            return  # signalled: never a victim again while this object runs
        job_id, flavor = r.id, job.flavor
        bound = self._bounds.get(job.queue)
        if bound is None:
            bound = self._bound_of(job.queue, ctx.quota.queues)
        protected_s = min(job.min_runtime_s, bound)
        if ctx.now_t_s - r.start_t_s < protected_s:  # `group_victims`' test, as written there
            self._waiting[job_id] = r
            heapq.heappush(self._wakes, (r.start_t_s + protected_s, job_id))
            return
        cls, until_t_s = until_of(r, ctx)
        members = self._group(flavor, cls)
        self._place[job_id] = members
        self._until[job_id] = until_t_s
        if until_t_s < math.inf:
            heapq.heappush(self._ends, (until_t_s, job_id))
        ids = members.ids
        if not ids or ids[-1] < job_id:  # in id order, the common case: at the end
            ids.append(job_id)
            members.runs.append(r)
        else:
            at = bisect_left(ids, job_id)
            ids.insert(at, job_id)
            members.runs.insert(at, r)
        members.sizes[r.gpus] = members.sizes.get(r.gpus, 0) + 1
        members.idset.add(job_id)

    def _bound_of(self, queue_name: str, queues: Mapping[str, Queue]) -> float:
        """The queue's bound on minimum run times, kept for the cycle's key."""
        queue = queues.get(queue_name)
        bound = self._bounds[queue_name] = min_runtime_bound_s(
            queue.max_min_runtime_s if queue is not None else None
        )
        return bound

    def _admit_all(
        self,
        running: Sequence[RunningJob],
        ctx: PreemptContext,
        until_of: Callable[[RunningJob, PreemptContext], tuple[Hashable, float]],
        all_of: _AllOf | None = None,
    ) -> None:
        """`_admit` of each of `running` (by id) into empty groups: the jobs that may be
        evicted picked in one loop, their classes judged at once (`all_of`, where the policy
        has it: one loop in the policy), grouped in another, the heaps made at once (73,500
        jobs on a start at 100,352 GPUs)."""
        now_t_s, queues = ctx.now_t_s, ctx.quota.queues
        bounds, waiting = self._bounds, self._waiting
        wakes, ends = self._wakes, self._ends
        judged: list[RunningJob] = []
        pick = judged.append
        one_flavor = running[0].job.flavor if running else ""
        mixed = False  # whether any job is of another flavor than the first's
        for r in running:
            if r.stop_cause is not None:
                continue
            job = r.job
            if job.flavor != one_flavor:
                mixed = True
            ran_s = now_t_s - r.start_t_s
            if ran_s >= job.min_runtime_s:  # past its own minimum, so past the capped one
                pick(r)
                continue
            bound = bounds.get(job.queue)
            if bound is None:
                bound = self._bound_of(job.queue, queues)
            protected_s = min(job.min_runtime_s, bound)
            if ran_s < protected_s:
                waiting[r.id] = r
                wakes.append((r.start_t_s + protected_s, r.id))
                continue
            pick(r)
        if all_of is not None:
            classes, untils = all_of(judged, ctx)
        else:
            pairs_of = [until_of(r, ctx) for r in judged]
            classes, untils = [p[0] for p in pairs_of], [p[1] for p in pairs_of]
        ids = [r.id for r in judged]  # a comprehension reads a slot faster than `attrgetter`
        self._until.update(zip(ids, untils, strict=True))
        inf = math.inf
        ends += [(t_s, i) for t_s, i in zip(untils, ids, strict=True) if t_s < inf]
        # the jobs by class (one dict lookup a job), then by flavor where a class has jobs
        # of several (a cluster of one flavor: never)
        slots: dict[Hashable, list[RunningJob]] = {}
        for cls, r in zip(classes, judged, strict=True):
            at = slots.get(cls)
            if at is None:
                slots[cls] = [r]
            else:
                at.append(r)
        for cls, runs in slots.items():
            flavors = {r.job.flavor for r in runs} if mixed else {one_flavor}
            if len(flavors) == 1:
                self._fill(self._group(flavors.pop(), cls), runs, [r.id for r in runs])
                continue
            for flavor in sorted(flavors):
                mine = [r for r in runs if r.job.flavor == flavor]
                self._fill(self._group(flavor, cls), mine, [r.id for r in mine])
        heapq.heapify(wakes)
        heapq.heapify(ends)

    def _fill(self, members: _Members, runs: list[RunningJob], ids: list[str]) -> None:
        """Put `runs` (with their `ids`) into `members`: at once where the group is new and
        they come in id order (a start's, from `running` sorted by id), else one by one."""
        self._place.update(dict.fromkeys(ids, members))
        sizes = members.sizes
        for gpus, n in Counter([r.gpus for r in runs]).items():
            sizes[gpus] = sizes.get(gpus, 0) + n
        members.idset.update(ids)
        if not members.ids and ids == sorted(ids):
            members.ids += ids
            members.runs += runs
            return
        for r, job_id in zip(runs, ids, strict=True):
            at = bisect_left(members.ids, job_id)
            members.ids.insert(at, job_id)
            members.runs.insert(at, r)

    def _group(self, flavor: str, cls: Hashable) -> _Members:
        """The group of (flavor, class), made if there is none."""
        pair = (flavor, cls)
        members = self._pairs.get(pair)
        if members is None:
            members = self._pairs[pair] = _Members(pair)
            self._groups.setdefault(flavor, {})[cls] = members
        return members

    def _drop(self, job_id: str) -> None:
        self._waiting.pop(job_id, None)
        members = self._place.pop(job_id, None)
        if members is None:
            return
        del self._until[job_id]
        flavor, cls = members.pair
        classes = self._groups[flavor]
        at = bisect_left(members.ids, job_id)
        gpus = members.runs[at].gpus
        del members.ids[at], members.runs[at]
        members.idset.discard(job_id)
        left = members.sizes[gpus] - 1
        if left:
            members.sizes[gpus] = left
        else:
            del members.sizes[gpus]
        if not members.ids:
            del classes[cls], self._pairs[members.pair]
            if not classes:
                del self._groups[flavor]


__all__ = [
    "KeptClasses",
    "KeptGroups",
    "Signals",
    "VictimClass",
    "class_key",
    "group_victims",
    "signals_of",
]
