"""The admission pass of a cycle: each pending job, in order, gets one `Outcome`.

The story of one job (`Pass._decide`), each step a call:

1. `Feasibility`: can it ever run here (queue, time limit, topology, quota)? If not, it waits
   with a reason that never holds anyone back.
2. Blocked flavor: a job ahead of it stopped its flavor (strict order, a starving job).
3. Quota, then placement on free GPUs, cores and memory (and on reserved ones it may
   borrow): it starts.
4. `Preemption`: victims stopping for it, or a new victim set: it waits for them (nominated).
5. `diagnose`: the reason it waits; if GPUs are short, a reservation where the backfill
   policy wants one (at the time both GPUs and its quota come back) and, under strict order
   or starvation, the block of its flavor.

Within a pass free GPUs, cores, memory and quota only shrink, which is what lets `PassMemo`
reuse failures and whole decisions for alike jobs (see memo.py).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from railyard.sched.classes import KeptClasses
from railyard.sched.config import SchedulerConfig
from railyard.sched.decisions import Reason, Reservation, Start, StartReason
from railyard.sched.diagnose import diagnose
from railyard.sched.feasible import Feasibility
from railyard.sched.holds import HoldBook
from railyard.sched.lenders import Lenders
from railyard.sched.limits import Estimates
from railyard.sched.memo import PassMemo
from railyard.sched.model import Job, RunningJob, starving_since_t_s, waiting_since_t_s
from railyard.sched.outcome import DEFERRED, PREEMPTING, STARTED, Outcome
from railyard.sched.policies.registry import (
    AdmissionPolicy,
    BackfillPolicy,
    OrderingPolicy,
    PlacementPolicy,
    PreemptionPolicy,
)
from railyard.sched.preempt import Preemption
from railyard.sched.quota import QuotaTree
from railyard.sched.reserve import BaseEvents, Blocker, base_events, earliest_start
from railyard.sched.snapshot import Load, Masks, Shape, Snapshot

_BLOCKING = frozenset({Reason.RESOURCES, Reason.TOPOLOGY, Reason.FRAGMENTATION, Reason.PRIORITY})
"""Reasons for which a job reserves GPUs and strict order stops the jobs behind. A job that
only its queue's quota stops (`QOSGrpGRES`: the GPUs are free) neither holds them nor stops
other queues, as Slurm treats a job held by its QOS limit. A job short of GPUs reserves
whether or not its quota fits now: the reservation is placed where both GPUs and quota come
back (reserve.py)."""


@dataclass(frozen=True)
class Policies:
    ordering: OrderingPolicy
    admission: AdmissionPolicy
    placement: PlacementPolicy
    backfill: BackfillPolicy
    preemption: PreemptionPolicy


class Pass:
    def __init__(
        self,
        *,
        now_t_s: float,
        config: SchedulerConfig,
        policies: Policies,
        snap: Snapshot,
        quota: QuotaTree,
        running: Sequence[RunningJob],
        run_masks: dict[str, Masks],
        run_loads: dict[str, Load],
        requeued: set[str],
        estimates: Estimates,
        running_blockers: Callable[[], Sequence[Blocker]],
        running_events: Callable[[str], BaseEvents] | None = None,
        kept_classes: KeptClasses | None = None,
        waiting: Sequence[Job] = (),
    ) -> None:
        self.now_t_s = now_t_s
        self.config = config
        self.policies = policies
        self.snap = snap
        self.quota = quota
        self.running = running  # sorted by id (the caller's booking sorted them)
        self.run_masks = run_masks
        self.run_loads = run_loads
        self.estimates = estimates
        self.memo = PassMemo()
        self.feasible = Feasibility(snap.topo, quota, policies.admission, policies.placement)
        self.holds = HoldBook(snap)
        self.lenders = Lenders(waiting, lambda job: self.feasible.reason(job) is None)
        self.preemption = Preemption(
            now_t_s=now_t_s,
            config=config,
            policy=policies.preemption,
            admission=policies.admission,
            placement=policies.placement,
            snap=snap,
            quota=quota,
            running=running,
            run_masks=run_masks,
            run_loads=run_loads,
            requeued=requeued,
            memo=self.memo,
            holds=self.holds,
            kept_classes=kept_classes,
            lenders=self.lenders,
        )
        self.starts: list[Start] = []
        self.started: list[Blocker] = []
        self.reasons: dict[str, Reason] = {}
        self.reservations: dict[str, Reservation] = {}
        self.nominated: set[str] = set()
        self.blocked_flavors: set[str] = set()
        self._reserve_attempts: dict[str, int] = {}
        self._running_blockers_of = running_blockers
        self._run_blockers: Sequence[Blocker] | None = None
        self._running_events_of = running_events  # kept between cycles by the booking
        self._run_events: dict[str, BaseEvents] = {}  # per flavor, from the running jobs
        self._yields = policies.preemption.name != "off"  # preemptible jobs may cross holds
        varies = policies.preemption.name == "las" or bool(self.preemption.backfilled)
        self._preemptor_class = self.preemption.decision_class if varies else None
        self._max_time_queues = {q.name for q in quota.queues.values() if q.max_time_s}
        hold = config.greedy_hold_after_s  # greedy backfill holds for a job blocked this long
        greedy = policies.backfill.name == "none"
        self._hold_before_t_s = now_t_s - hold if greedy and hold is not None else -math.inf

    # -- the per-job story -------------------------------------------------------------------

    def admit_in_order(
        self, jobs: Iterable[Job], *, starving_t_s: float, defer_borrowing: bool = False
    ) -> list[Job]:
        """Decide for each job in turn (a job submitted by `starving_t_s` is starving); return
        those deferred because they fit only by borrowing.

        Jobs alike in everything the decision reads (queue, shape, priority, service, which
        holds they may use, tier) get the same outcome while nothing has changed since the
        last one was decided, so a long blocked tail costs a dictionary lookup per job. The
        loop runs once per pending job per cycle: what it reads is bound once, outside it."""
        deferred: list[Job] = []
        memo, decided, reasons = self.memo, self.memo.decided, self.reasons
        holds, lendable = self.holds, self.holds.lendable
        end_t_s, now_t_s, yields = self.estimates.end_t_s, self.now_t_s, self._yields
        lend_flavor, lend_version, lend_starts, lend_bits = "", -1, [0.0], [0, 0]
        signalled_for = self.preemption.signalled_for
        max_time_queues, over_max_time = self._max_time_queues, self.feasible.over_max_time
        preemptor_class, hold_before_t_s = self._preemptor_class, self._hold_before_t_s
        preemption = self.preemption
        # what is the same for every job of the pass is asked once: whether any queue has a
        # MaxTime, whether greedy backfill holds GPUs at all, and (again after each decision,
        # the only thing that spends a victim search) whether the class still matters
        has_max_time, holds_back = bool(max_time_queues), hold_before_t_s > -math.inf
        classify = preemptor_class if preemptor_class and preemption.searches_left else None
        for job in jobs:
            # aged from its submission or its --begin / release, whichever is later, less
            # the time it ran (`starving_since_t_s`)
            starving = job.submit_t_s <= starving_t_s and starving_since_t_s(job) <= starving_t_s
            usable = 0
            flavor = job.flavor
            if flavor in lendable:  # `holds.usable`, inline: asked for every job
                if flavor != lend_flavor or holds.version != lend_version:
                    lend_flavor = flavor
                    lend_version, lend_starts, lend_bits = holds.lend_index(lend_flavor)
                if job.preemptible and yields:
                    usable = lend_bits[0]
                else:
                    walltime_s = job.walltime_s
                    end = now_t_s + walltime_s if walltime_s is not None else end_t_s(job, now_t_s)
                    usable = lend_bits[bisect_left(lend_starts, end)]
            if job.nominated or job.id in signalled_for:
                outcome = self._decide(job, usable, starving, defer_borrowing)
            else:
                # The identity of `alike` stands for its value: alike jobs share one tuple
                # (model._interned), and every job of the pass, so every id, is alive till
                # it ends. Jobs alike but not sharing (past the bound) just miss the memo.
                key = (
                    id(job.alike),
                    has_max_time and job.queue in max_time_queues and over_max_time(job),
                    # the class matters only to a victim search: none once the cycle's
                    # searches are spent (then 10,000 jobs on 11 levels decide as one)
                    classify(job) if classify else None,
                    usable,
                    starving,
                    defer_borrowing,
                    holds_back
                    and job.submit_t_s <= hold_before_t_s
                    and (job.begin_t_s is None or job.begin_t_s <= hold_before_t_s),
                )
                hit = decided.get(key)
                before = memo.epoch
                if hit is not None and hit[0] == before:
                    # a kept outcome waits or defers: a start or an eviction moves the epoch,
                    # so neither is kept, and no search was spent
                    outcome = hit[1]
                    if outcome.reason is not None:
                        reasons[job.id] = outcome.reason
                    elif outcome is DEFERRED:
                        deferred.append(job)
                    continue
                outcome = self._decide(job, usable, starving, defer_borrowing)
                if memo.epoch == before:  # the decision changed nothing: reusable
                    decided[key] = (before, outcome)
            if classify and not preemption.searches_left:  # the last search was spent
                classify = None
            if outcome.reason is not None:
                reasons[job.id] = outcome.reason
            elif outcome is DEFERRED:
                deferred.append(job)
            if outcome is PREEMPTING:
                self.nominated.add(job.id)
        return deferred

    def _decide(self, job: Job, usable: int, starving: bool, defer_borrowing: bool) -> Outcome:
        never = self.feasible.reason(job)
        if never is not None:
            return Outcome.waiting(never)
        if job.flavor in self.blocked_flavors:
            return Outcome.waiting(Reason.PRIORITY)
        shape = Shape.of(job)
        quota_ok = self._quota_ok(job)
        if quota_ok and defer_borrowing and not (starving or job.nominated) and self._defers(job):
            return DEFERRED
        if quota_ok:
            found = self._place(shape, usable)
            if found is not None:
                self._start(job, shape, found, usable, self.estimates.end_t_s(job, self.now_t_s))
                return STARTED
        if self.preemption.preempt(job, shape, self._nominate):
            return PREEMPTING
        reason = diagnose(
            self.snap,
            shape,
            quota_ok,
            self.holds,
            self.policies.placement,
            self.memo,
            len(self.starts),
        )
        if reason in _BLOCKING:
            reserved = self._maybe_reserve(job, shape, quota_ok, starving)
            if self.policies.backfill.blocks or (starving and not reserved):
                self.blocked_flavors.add(job.flavor)
                self.memo.changed()
        return Outcome.waiting(reason)

    # -- quota and placement -----------------------------------------------------------------

    def _quota_ok(self, job: Job) -> bool:
        if self.memo.quota_failed(job.queue, job.flavor, job.gpus):
            return False
        if self.policies.admission.fits(self.quota, job):
            return True
        self.memo.note_quota_fail(job.queue, job.flavor, job.gpus)
        return False

    def _defers(self, job: Job) -> bool:
        """Does the job wait for the jobs within their quota (Kueue's order)? Only if what it
        takes could be reclaimed (`QuotaTree.reclaim_exposed`): a queue alone in its team
        borrows the team's own nominal, which no other team may reclaim, and putting it
        after another team's borrower let that borrower be reclaimed at once (issue 56)."""
        if not self.policies.admission.defers_borrowing:
            return False
        return self.quota.reclaim_exposed(job.queue, job.flavor, job.gpus)

    def _borrows(self, job: Job) -> bool:
        if not self.policies.admission.defers_borrowing:
            return False
        key = (job.queue, job.flavor)
        return self.quota.total.get(key, 0) + job.gpus > self.quota.subtree_nominal.get(key, 0)

    def _place(self, shape: Shape, usable: int) -> Masks | None:
        """Place on free GPUs, cores and memory, plus the reserved ones this job may use."""
        key = (shape, usable)
        if key in self.memo.place_fail:
            return None
        loads = self.holds.loads(usable) if usable else ()
        with self.snap.without(self.holds.masks(usable), loads):
            found = self.policies.placement.place(self.snap, shape)
        if found is None:
            self.memo.place_fail.add(key)
        return found

    def _start(self, job: Job, shape: Shape, masks: Masks, usable: int, end_t_s: float) -> None:
        self.memo.changed()
        load = shape.load(masks) if (shape.cpus_per_worker or shape.mem_per_worker_mib) else None
        backfill = self.holds.give(job.flavor, masks, load, usable)
        self.snap.take(masks)
        if load:
            self.snap.take_load(load)
        self.started.append(Blocker(end_t_s, masks, job.queue, job.flavor, job.gpus, load))
        borrowing = self._borrows(job)
        self.quota.add(job.queue, job.flavor, job.gpus)
        reason = StartReason.BACKFILL if backfill else StartReason.FITS
        self.starts.append(Start(job.id, self.snap.topo.placement(masks), reason, borrowing))
        self.lenders.gone.add(job.id)

    def _nominate(self, job: Job, grace_s: float, masks: Masks) -> None:
        """Victims make room: hold their GPUs (and the quota) for `job` from now on."""
        self.memo.changed()
        self.lenders.gone.add(job.id)
        self.quota.add(job.queue, job.flavor, job.gpus)
        end_t_s = self.estimates.end_t_s(job, self.now_t_s + grace_s)
        self.holds.add(job.id, job.flavor, -math.inf, end_t_s, masks, Shape.of(job).load(masks))

    # -- reservations -------------------------------------------------------------------------

    def _running_blockers(self) -> Sequence[Blocker]:
        """Running jobs as blockers (their ends do not change within a pass: built once, by
        the booking, which keeps those whose end moves with nothing between cycles)."""
        if self._run_blockers is None:
            self._run_blockers = self._running_blockers_of()
        return self._run_blockers

    def _maybe_reserve(self, job: Job, shape: Shape, quota_ok: bool, starving: bool) -> bool:
        attempts = self._reserve_attempts.get(job.flavor, 0)
        limit = self.config.max_reservations
        wants = attempts < limit if starving else self.policies.backfill.reserves(attempts, limit)
        if not wants and waiting_since_t_s(job) <= self._hold_before_t_s:
            wants = attempts == 0  # greedy, but held back long enough: EASY's head
        if not wants:
            return False
        self.memo.changed()
        self._reserve_attempts[job.flavor] = attempts + 1
        running = self._running_blockers()
        base = self._run_events.get(job.flavor)
        if base is None:
            kept = self._running_events_of
            base = (
                kept(job.flavor)
                if kept is not None
                else base_events(self.snap, job.flavor, running)
            )
            self._run_events[job.flavor] = base
        extra = [*self.started]
        extra += [Blocker(h.end_t_s, h.full, load=h.held_load) for h in self.holds.holds]
        admission = self.policies.admission
        found = earliest_start(
            self.snap,
            shape,
            running,
            self.policies.placement,
            self.now_t_s,
            self.quota,
            None if quota_ok else (lambda: admission.fits(self.quota, job)),
            base=base,
            extra=extra,
        )
        if found is None:
            return False
        t_s, masks = found
        end_t_s = self.estimates.end_t_s(job, t_s)
        self.holds.add(job.id, job.flavor, t_s, end_t_s, masks, shape.load(masks))
        self.reservations[job.id] = Reservation(job.id, t_s, self.snap.topo.placement(masks))
        return True
