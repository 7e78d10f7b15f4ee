"""The preemption step of a pass: make room for a job by stopping others, once, for good.

Rules that keep preemption from wasting work (each was a bug once):
- a job whose victims are still stopping keeps their GPUs (a nomination): it needs no new
  victims, and the GPUs are held for it, also in the next cycles, until it starts;
- a job is never preempted for a job that it would itself preempt back once the two had
  swapped places (no ping-pong: reclaim against priority, two time slices), nor for one
  that a waiting job of a lender would reclaim at once (lenders.py);
- a victim must have run its minimum run time, capped by its queue's bound;
- a search that cannot succeed is not counted against the search budgets (an impossible job
  would starve a later job of its queue of its one search);
- preemptible jobs that backfilled across a reservation yield to the job that holds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from operator import attrgetter

from railyard.sched.candidate import USEFUL, candidates_of
from railyard.sched.classes import KeptClasses, VictimClass, group_victims, signals_of
from railyard.sched.config import SchedulerConfig
from railyard.sched.decisions import Preempt, PreemptReason
from railyard.sched.holds import HoldBook
from railyard.sched.lenders import Lenders, LoanHolders, reclaims_only_borrowed
from railyard.sched.limits import checkpoint_grace_s, min_runtime_s
from railyard.sched.memo import PassMemo
from railyard.sched.model import Job, RunningJob
from railyard.sched.policies.preemption import may_preempt_by_priority
from railyard.sched.policies.registry import (
    AdmissionPolicy,
    PlacementPolicy,
    PreemptContext,
    PreemptionPolicy,
    attained_gpu_s,
    pending_level,
    starving_t_s,
)
from railyard.sched.quota import QuotaTree
from railyard.sched.snapshot import Load, Masks, Shape, Snapshot
from railyard.sched.victims import ByNode, Candidate, find_victims, removed

# Victim reasons that may not take GPUs a higher-ranked job's reservation counts on. Time
# slicing may: the reserver may be unable to slice the victim itself (a gang as far from done).
_BEHIND_RESERVATIONS = frozenset({PreemptReason.PRIORITY})


def _overlaps(masks: Masks, other: Masks) -> bool:
    return any(m & other.get(i, 0) for i, m in masks.items())


Nominate = Callable[[Job, float, Masks], None]
"""Called with (preemptor, grace seconds, GPUs) when victims make room: hold them for it."""


class Preemption:
    def __init__(
        self,
        *,
        now_t_s: float,
        config: SchedulerConfig,
        policy: PreemptionPolicy,
        admission: AdmissionPolicy,
        placement: PlacementPolicy,
        snap: Snapshot,
        quota: QuotaTree,
        running: Sequence[RunningJob],
        run_masks: dict[str, Masks],
        run_loads: dict[str, Load],
        requeued: set[str],
        memo: PassMemo,
        holds: HoldBook | None = None,
        kept_classes: KeptClasses | None = None,
        lenders: Lenders | None = None,
    ) -> None:
        self.now_t_s = now_t_s
        self.holds = holds
        self.lenders = lenders
        self.config = config
        self.policy = policy
        self.admission = admission
        self.placement = placement
        self.snap = snap
        self.quota = quota
        self.run_masks = run_masks
        self.run_loads = run_loads
        self.memo = memo
        self.ctx = PreemptContext(
            quota, now_t_s, config.priority_preemption_min, config.service_levels_gpu_s,
            config.time_slice_quantum_s, config.time_slice_by, config.starvation_limit_s,
            math.inf if config.starved_unsliced_s is None else config.starved_unsliced_s,
            config.starving_slices, config.promotion_wait_ratio,
            math.inf if config.unsliced_after_s is None else config.unsliced_after_s,
            config.slice_level_gap,
            math.inf if config.unsliced_after_restarts is None else config.unsliced_after_restarts,
        )  # fmt: skip
        self.running = running
        self.signalled = set(requeued)
        self.signalled_for: dict[str, list[RunningJob]] = {}
        # one walk over the running jobs (73,500), kept while they are the same tuple
        walk = kept_classes.signals if kept_classes is not None else signals_of
        stopping, asked, backfilled = walk(running)
        self.signalled.update(stopping)
        for r in asked:
            if (for_id := r.preempt_for) is not None and r.id not in requeued:
                self.signalled_for.setdefault(for_id, []).append(r)
        self.backfilled = [r for r in backfilled if r.id not in self.signalled]
        # `signalled` in the order the pass added to it (it only adds): what a kept list of
        # a class's candidates must have left out since it was made
        self._signal_log = list(self.signalled)
        self.preemptor_class = self._classify_preemptors()
        # What of a job, besides its `alike`, an admission decision may read: the class,
        # or under time slicing without backfilled jobs the attained service the class is
        # cut from (finer, so a memo keyed on it only misses more; read in C for each of
        # 10,000 pending jobs a cycle instead of a bisect in a lambda).
        self.decision_class: Callable[[Job], Hashable] = self.preemptor_class
        if self.policy.name == "las" and not self.backfilled and config.time_slice_by == "attained":
            self.decision_class = attrgetter("attained_gpu_s")
        self._classes: dict[str, dict[Hashable, VictimClass]] | None = None
        self._kept_classes = kept_classes
        self._candidate_cache: dict[Hashable, tuple[int, list[Candidate]]] = {}
        self._candidate_of: dict[PreemptReason, dict[str, Candidate]] = {}  # no key tuples
        self._by_node = ByNode(snap.topo)  # those candidates by node, for one-node searches
        self._free_reasons: dict[Hashable, dict[Hashable, PreemptReason | None]] = {}
        self._alike: dict[str, Hashable] = {}  # a victim's key as a preemptor (`_answer`)
        self.searches_left = config.preemption_searches_per_cycle  # read by the admit loop
        self._restart_s = config.restart_cost_s
        self._max_loss = config.eviction_max_loss
        self._running_as: RunningJob | None = None
        self._queue_searches: dict[str, int] = {}
        self.decisions: list[Preempt] = []
        self._loan_holders = LoanHolders(running, lenders)  # `reclaims_only_borrowed`

    def _classify_preemptors(self) -> Callable[[Job], Hashable]:
        """What besides queue, priority and shape decides a job's victims (its service level
        when slicing, its age while backfilled jobs may yield to it), chosen once a pass."""
        if self.policy.name == "las":
            ctx = self.ctx
            level = pending_level(
                ctx.service_levels_gpu_s,
                ctx.time_slice_by,
                ctx.quota.queues,
                starving_t_s(ctx),
                ctx.now_t_s,
                ctx.promotion_wait_ratio,
            )
            if self.backfilled:
                return lambda job: (level(job), job.submit_t_s)
            return level
        if self.backfilled:
            return lambda job: job.submit_t_s
        return lambda job: None

    def preempt(self, job: Job, shape: Shape, nominate: Nominate) -> bool:
        """Use victims already stopping for this job, or signal the cheapest new set."""
        mine = self.signalled_for.get(job.id, [])
        victims: list[Candidate] = []
        if mine:
            masks = [self.run_masks[r.id] for r in mine]
            loads = [load for r in mine if (load := self.run_loads.get(r.id))]
            with removed(self.snap, self.quota, mine, masks, loads):
                found = self._fits(job, shape)
                if found is None:
                    victims, found = self._search(job, shape) or ([], None)
        elif self._may_search(job):
            victims, found = self._search(job, shape) or ([], None)
        else:
            return False
        if found is None:
            return False
        for c in victims:
            if c.run.id not in self.signalled:
                self.signalled.add(c.run.id)
                self._signal_log.append(c.run.id)
            queue = self.quota.queues.get(c.run.job.queue)
            grace_s = checkpoint_grace_s(c.run.job, queue)
            self.decisions.append(Preempt(c.run.id, grace_s, c.reason, for_job_id=job.id))
        grace_s = max(
            (
                checkpoint_grace_s(r.job, self.quota.queues.get(r.job.queue))
                for r in [*mine, *(c.run for c in victims)]
            ),
            default=0.0,
        )
        nominate(job, grace_s, found)
        return True

    def _fits(self, job: Job, shape: Shape) -> Masks | None:
        if not self.admission.fits(self.quota, job):
            return None
        return self.placement.place(self.snap, shape)

    def _may_search(self, job: Job) -> bool:
        return (
            self.searches_left > 0
            and self.policy.name != "off"
            and self._queue_searches.get(job.queue, 0) < self.config.preemption_searches_per_queue
        )

    def _search(self, job: Job, shape: Shape) -> tuple[list[Candidate], Masks] | None:
        if not self._may_search(job):
            return None
        key = (job.queue, job.priority, shape, self.preemptor_class(job))
        if key in self.memo.preempt_fail:
            return None
        if not self.policy.may_preempt(job, self.ctx) and not self._may_take_backfilled(job):
            return None  # changes with quota use: not remembered as a failure
        if (
            self._reclaims_only(job)
            and not self.quota.borrowing(job.flavor)
            and not self._may_take_backfilled(job)
        ):
            return None  # nobody borrows: nothing to reclaim (changes with quota use too)
        candidates = self._candidates(job)
        short = job.gpus - self.snap.flavor_free.get(job.flavor, 0)
        useful = sum(map(USEFUL, candidates))
        if not candidates or useful < short:
            self.memo.preempt_fail.add(key)  # hopeless: costs no search budget
            return None
        self.memo.changed()
        self.searches_left -= 1
        self._queue_searches[job.queue] = self._queue_searches.get(job.queue, 0) + 1
        result = find_victims(
            job,
            candidates,
            self.snap,
            self.quota,
            lambda: self._fits(job, shape),
            self.config.exact_victim_search_max,
            quota_fits=self.admission.fits(self.quota, job),
            by_node=self._by_node,
            useful_total=useful,
        )
        if result is not None and not reclaims_only_borrowed(
            self.quota, job, result[0], self._loan_holders
        ):
            result = None
        if result is not None and self._undone_at_once(job, result[0]):
            result = None
        if result is None:
            self.memo.preempt_fail.add(key)
        return result

    def _undone_at_once(self, job: Job, victims: Sequence[Candidate]) -> bool:
        """Once the set is gone and `job` runs, would a victim evict `job` back (each asked
        alone missed a lender reclaiming two siblings, for ever), or a waiting job of a
        lender reclaim it (lenders.py)? Either way the eviction gains nothing (issue 56)."""
        quota, flavor = self.quota, job.flavor
        set_back = len(victims) >= 2  # one victim: its own answer was the set's
        lenders = self.lenders if self.lenders and self.lenders.lent(quota, flavor) else None
        if not set_back and lenders is None:
            return False
        for c in victims:
            quota.remove(c.run.job.queue, flavor, c.gpus)
        quota.add(job.queue, flavor, job.gpus)
        try:
            if set_back:
                swapped = self._as_running(job)
                reason = self.policy.victim_reason
                if any(reason(c.run.job, swapped, self.ctx) is not None for c in victims):
                    return True
            return lenders is not None and lenders.reclaimer(quota, job) is not None
        finally:
            quota.remove(job.queue, flavor, job.gpus)
            for c in victims:
                quota.add(c.run.job.queue, flavor, c.gpus)

    def _candidates(self, job: Job) -> list[Candidate]:
        """Who `job` may evict; alike preemptors (queue, priority, size, class) get the same
        list while nothing has changed (quota use and signals change only with the epoch)."""
        key = (job.queue, job.priority, job.flavor, job.gpus, self.preemptor_class(job))
        hit = self._candidate_cache.get(key)
        if hit is not None and hit[0] == self.memo.epoch:
            return hit[1]
        out = self._find_candidates(job)
        self._candidate_cache[key] = (self.memo.epoch, out)
        return out

    def _victim_classes(self) -> dict[str, dict[Hashable, VictimClass]]:
        """Running jobs that may be evicted at all, grouped by flavor and by what the policy
        judges them on; built on the first search of a pass (most passes search nobody)."""
        if self._classes is None:
            self._classes = group_victims(
                self.running, self.signalled, self.policy, self.ctx, self._kept_classes
            )
        return self._classes

    def _reserved(self) -> dict[int, int]:
        """GPUs, per node, that reservations of this pass count on, free or still busy. Every
        job that reserved was admitted before the one now searching: it ranks ahead."""
        out: dict[int, int] = {}
        for h in self.holds.holds if self.holds is not None else ():
            if not h.is_nomination:
                for i, m in h.full.items():
                    out[i] = out.get(i, 0) | m
        return out

    def _find_candidates(self, job: Job) -> list[Candidate]:
        """Walks every running job that may be evicted, once per victim search (time slicing
        searches for up to 16 jobs a queue, over 12,000 running jobs at 16,384 GPUs): what
        the walk reads per job is bound outside it."""
        out: list[Candidate] = []
        reserved = self._reserved()
        signalled, log = self.signalled, self._signal_log
        answers: dict[Hashable, bool] = {}
        policy, ctx, free_reasons = self.policy, self.ctx, self._free_reasons
        # What of the preemptor a quota-free reason reads (its priority and class), and
        # what reclaim reads (its queue and size): asked of each class, each search.
        asks = (job.priority, self.preemptor_class(job))
        free = free_reasons.get(asks)  # per class, for preemptors asking alike
        if free is None:
            free = free_reasons[asks] = {}
        reclaimable, mine, gpus = self.quota.reclaimable, job.queue, job.gpus
        reclaims: dict[str, bool] = {}  # victim queue -> may this job reclaim from it now
        for cls, group in self._victim_classes().get(job.flavor, {}).items():
            members = group.members
            if policy.quota_reason_is_reclaim:  # `victim_reason`, its quota-free part kept
                if cls in free:
                    reason = free[cls]
                else:
                    reason = free[cls] = policy.reason_without_quota(job, members[0], ctx)
                if reason is None:
                    theirs = members[0].job.queue
                    may = reclaims.get(theirs)
                    if may is None:
                        may = reclaims[theirs] = reclaimable(theirs, mine, job.flavor, gpus)
                    if may:
                        reason = PreemptReason.RECLAIM
            else:
                reason = policy.victim_reason(job, members[0], ctx)
            if reason is None:
                continue
            # A job ranked ahead reserved these GPUs for when their jobs end: evicting one
            # by priority would hand them to a later job and push that reservation back (a
            # lender's reclaim of its own quota, and time slicing, are not held back).
            guarded = reserved if reason in _BEHIND_RESERVATIONS else None
            if guarded:
                out += self._guarded_candidates(job, members, reason, guarded, answers)
                continue
            # Alike victims of one size answer alike: the first not yet signalled asks.
            back: dict[int, bool] = {}
            for r in members:
                if r.gpus not in back and r.id not in signalled:
                    back[r.gpus] = self._answer(job, r, answers)
                    if len(back) == group.sizes:
                        break
            made = group.made.get(reason) or self._made(group, reason)
            if not any(back.values()) and group.ids.isdisjoint(signalled):
                out += made  # the common case: every one of them, in order
                continue
            out += group.left_of(reason, back, made, signalled, log)
        if self._max_loss is not None:
            out = [c for c in out if c.reason is not PreemptReason.TIME_SLICE or self._worth(c)]
        if not self.backfilled:
            return out
        seen = {c.run.id for c in out}
        for r in self.backfilled:  # jumped ahead of `job` across its reservation
            queue = self.quota.queues.get(r.job.queue)
            if self.now_t_s - r.start_t_s < min_runtime_s(r.job, queue):
                continue
            if (
                r.job.flavor == job.flavor
                and r.id not in seen
                and r.id not in self.signalled
                and r.job.priority <= job.priority
                and (r.job.submit_t_s, r.id) > (job.submit_t_s, job.id)
                # a job that borrows its lender's quota across a reservation would be
                # reclaimed by the very job that yielded to it
                and not self._would_reclaim_back(job, r)
            ):
                out.append(self._candidate(r, PreemptReason.RESERVATION))
        return out

    def _answer(self, job: Job, r: RunningJob, answers: dict[Hashable, bool]) -> bool:
        """Would `r` evict `job` back? Victims alike as preemptors (queue, priority, size,
        class) answer alike: one what-if each per search."""
        alike = self._alike.get(r.id)
        if alike is None:  # the first members of the classes, asked again by each search
            v = r.job
            alike = (v.queue, v.priority, v.flavor, v.gpus, r.gpus, self.preemptor_class(v))
            self._alike[r.id] = alike
        answer = answers.get(alike)
        if answer is None:
            answer = answers[alike] = self._would_preempt_back(job, r)
        return answer

    def _made(self, group: VictimClass, reason: PreemptReason) -> list[Candidate]:
        """The class's members as candidates for `reason`, in order, made once a pass."""
        made = group.made[reason] = candidates_of(
            group.members, reason, self.now_t_s, self.run_masks, self.run_loads,
            self.snap.topo.ready, self._restart_s, self._candidate_of.setdefault(reason, {}),
        )  # fmt: skip
        return made

    def _guarded_candidates(
        self,
        job: Job,
        members: list[RunningJob],
        reason: PreemptReason,
        guarded: dict[int, int],
        answers: dict[Hashable, bool],
    ) -> list[Candidate]:
        """As the common case, but members on GPUs a reservation counts on are left out."""
        out: list[Candidate] = []
        back: dict[int, bool] = {}
        for r in members:
            if r.id in self.signalled or _overlaps(self.run_masks[r.id], guarded):
                continue
            answer = back.get(r.gpus)
            if answer is None:
                answer = back[r.gpus] = self._answer(job, r, answers)
            if not answer:
                out.append(self._candidate(r, reason))
        return out

    def _reclaims_only(self, job: Job) -> bool:
        """Is reclaim the only reason this policy could give to evict for `job`?"""
        name = self.policy.name
        return name == "reclaim" or (name == "on" and not may_preempt_by_priority(job, self.ctx))

    def _may_take_backfilled(self, job: Job) -> bool:
        return any(
            r.job.flavor == job.flavor and (r.job.submit_t_s, r.id) > (job.submit_t_s, job.id)
            for r in self.backfilled
        )

    def _swapped(self, job: Job, victim: RunningJob, question: Callable[[], bool]) -> bool:
        """`question` answered with the quota as if `job` ran in the victim's place."""
        v = victim.job
        return self.quota.ask_moved(v.queue, victim.gpus, job.queue, job.gpus, v.flavor, question)

    def _as_running(self, job: Job) -> RunningJob:
        """`job` as if it had run one quantum (the victim's view once the two swapped)."""
        if self._running_as is None or self._running_as.job is not job:
            start_t_s = self.now_t_s - self.config.time_slice_quantum_s
            self._running_as = RunningJob(job, {}, start_t_s)
        return self._running_as

    def _would_reclaim_back(self, job: Job, victim: RunningJob) -> bool:
        """Once swapped, would the victim's queue take its quota back from the job? (Time
        slicing may still hand a reservation's GPUs back and forth: that is its design.)"""
        v = victim.job
        return self.quota.reclaimable_moved(
            v.queue, victim.gpus, job.queue, job.gpus, v.flavor, victim.gpus
        )

    def _would_preempt_back(self, job: Job, victim: RunningJob) -> bool:
        """Once swapped (victim pending, job running), would the victim evict the job?"""
        swapped = self._as_running(job)
        if self.policy.reason_without_quota(victim.job, swapped, self.ctx) is not None:
            return True
        v = victim.job
        if self.policy.quota_reason_is_reclaim:  # `reclaims(v, swapped)`, swapped
            return self.quota.reclaimable_moved(
                v.queue, victim.gpus, job.queue, job.gpus, v.flavor, v.gpus
            )
        return self._swapped(
            job,
            victim,
            lambda: self.policy.victim_reason(victim.job, swapped, self.ctx) is not None,
        )

    def _worth(self, c: Candidate) -> bool:
        """Whether a time slice may evict `c`: what it throws away (work since its last
        checkpoint, its restart) is at most `eviction_max_loss` of its service so far. A job
        that never checkpoints is not sliced; one that has checkpointed and has a grace to
        save in on the signal loses only its restart (issue 56: docs/explanation/scheduler.md)."""
        assert self._max_loss is not None
        run = c.run
        served = attained_gpu_s(run, self.now_t_s)
        saves = run.last_checkpoint_t_s is not None and run.job.checkpoint_grace_s > 0
        thrown = c.cost[1] - c.lost_gpu_s if saves else c.cost[1]
        return thrown <= self._max_loss * served

    def _candidate(self, r: RunningJob, reason: PreemptReason) -> Candidate:
        """One per running job and reason in a pass (its masks, nodes and clock are fixed)."""
        hit = self._candidate_of.get(reason, {}).get(r.id)
        return hit if hit is not None else self._new_candidate(r, reason)

    def _new_candidate(self, r: RunningJob, reason: PreemptReason) -> Candidate:
        kept = self._candidate_of.setdefault(reason, {})
        run_masks, loads, ready = self.run_masks, self.run_loads, self.snap.topo.ready
        return candidates_of([r], reason, self.now_t_s, run_masks, loads, ready,
                             self._restart_s, kept)[0]  # fmt: skip
