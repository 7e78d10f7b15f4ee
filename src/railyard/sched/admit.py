"""The admission pass of a cycle: each pending job, in order, starts, preempts, reserves or
gets a reason.

Within a pass free GPUs and quota only shrink (what-ifs are undone on exit), so a failure to
place a shape, to fit a quota or to find victims stays a failure for the rest of the pass;
caching those failures is what lets one pass over 10,000 pending jobs stay fast.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from railyard.sched.config import SchedulerConfig
from railyard.sched.decisions import (
    Preempt,
    PreemptReason,
    Reason,
    Reservation,
    Start,
    StartReason,
)
from railyard.sched.model import Job, RunningJob, TopologyMode
from railyard.sched.policies.registry import (
    AdmissionPolicy,
    BackfillPolicy,
    OrderingPolicy,
    PlacementPolicy,
    PreemptionPolicy,
)
from railyard.sched.quota import QuotaTree
from railyard.sched.reservation import Blocker, earliest_start
from railyard.sched.snapshot import Masks, Shape, Snapshot, bits
from railyard.sched.victims import Candidate, find_victims, removed


@dataclass(frozen=True)
class Policies:
    ordering: OrderingPolicy
    admission: AdmissionPolicy
    placement: PlacementPolicy
    backfill: BackfillPolicy
    preemption: PreemptionPolicy


@dataclass
class Hold:
    """GPUs kept for a reserved (start `t_s`) or nominated (`t_s` = -inf) job.

    Later jobs may use them only if they end by `t_s`; `held` is the part taken in the
    snapshot now, `full` the whole placement (the rest is still busy with running jobs).
    """

    job_id: str
    flavor: str
    t_s: float
    end_t_s: float
    full: Masks
    held: Masks


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
        requeued: set[str],
    ) -> None:
        self.now_t_s = now_t_s
        self.config = config
        self.policies = policies
        self.snap = snap
        self.quota = quota
        self.topo = snap.topo
        self.running = running  # sorted by id (the caller's booking sorted them)
        self.run_masks = run_masks
        self.signalled = {r.id for r in self.running if r.preempt_for is not None} | requeued
        self.signalled_for: dict[str, list[RunningJob]] = {}
        # Preemption policies judge a victim by its queue, priority and spot flag, so victims
        # are grouped by those and each group is judged once per search.
        self.victim_classes: dict[str, dict[tuple[str, int, bool], list[RunningJob]]] = {}
        for r in self.running:
            if r.preempt_for is not None and r.id not in requeued:
                self.signalled_for.setdefault(r.preempt_for, []).append(r)
            if now_t_s - r.start_t_s >= r.job.min_runtime_s:
                cls = (r.job.queue, r.job.priority, r.job.preemptible)
                self.victim_classes.setdefault(r.job.flavor, {}).setdefault(cls, []).append(r)
        self._class_candidates: dict[tuple[object, ...], list[Candidate]] = {}
        self._searches_left = config.preemption_searches_per_cycle
        self._queue_searches: dict[str, int] = {}
        self._static: dict[tuple[str, str, int, int], Reason | None] = {}
        self.starts: list[Start] = []
        self.preemptions: list[Preempt] = []
        self.reasons: dict[str, Reason] = {}
        self.reservations: dict[str, Reservation] = {}
        self.holds: list[Hold] = []
        self._holds_by_flavor: dict[str, list[int]] = {}
        self.started: list[Blocker] = []
        self.blocked_flavors: set[str] = set()
        self._place_fail: set[tuple[Shape, int]] = set()
        self._quota_fail: dict[tuple[str, str], int] = {}
        self._preempt_fail: set[tuple[str, int, Shape]] = set()
        self._diagnosed: dict[tuple[Shape, int, int], Reason] = {}
        self._reserve_attempts: dict[str, int] = {}
        self._decided: dict[tuple[object, ...], tuple[int, Reason | bool]] = {}
        self._epoch = 0

    # -- the per-job story -------------------------------------------------------------------

    def admit(self, job: Job, *, starving: bool, defer_borrowing: bool = False) -> bool:
        """Decide for one job; False if it was deferred because it would have to borrow.

        Jobs alike in everything the decision reads (queue, shape, priority, which holds they
        may use, tier) get the same outcome while nothing has changed since the last one was
        decided, so a long blocked tail costs a dictionary lookup per job.
        """
        usable = self._usable_holds(job)
        key = None
        if job.id not in self.signalled_for:
            key = (
                job.queue,
                job.flavor,
                job.workers,
                job.gpus_per_worker,
                job.topology,
                job.priority,
                usable,
                starving,
                defer_borrowing,
            )
            hit = self._decided.get(key)
            before = self._version()
            if hit is not None and hit[0] == before:
                outcome = hit[1]
            else:
                outcome = self._decide(job, usable, starving, defer_borrowing)
                if self._version() == before:  # the decision changed nothing: reusable
                    self._decided[key] = (before, outcome)
        else:
            outcome = self._decide(job, usable, starving, defer_borrowing)
        if isinstance(outcome, Reason):
            self.reasons[job.id] = outcome
        return outcome is not False

    def _version(self) -> int:
        """Changes whenever anything a decision reads may have changed: every start, hold,
        preemption, victim search, strict block and reservation attempt bumps `_epoch`."""
        return self._epoch

    def _decide(
        self, job: Job, usable: int, starving: bool, defer_borrowing: bool
    ) -> Reason | bool:
        """A reason if the job waits, True if it started, False if deferred (borrower)."""
        static = self._static_reason(job)
        if static is not None:
            return static
        if job.flavor in self.blocked_flavors:
            return Reason.PRIORITY
        shape = Shape.of(job)
        quota_ok = self._quota_ok(job)
        if quota_ok and defer_borrowing and not starving and self._borrows(job):
            return False
        if quota_ok:
            found = self._place(shape, usable)
            if found is not None:
                self._start(job, found)
                return True
        if self._preempt(job, shape):
            return Reason.PREEMPTING
        if not quota_ok:
            return Reason.QUOTA
        reason = self._diagnose(shape)
        attempts = self._reserve_attempts.get(job.flavor, 0)
        limit = self.config.max_reservations
        wants = attempts < limit if starving else self.policies.backfill.reserves(attempts, limit)
        reserved = wants and self._reserve(job, shape)
        if (starving and not reserved) or self.policies.backfill.blocks:
            self.blocked_flavors.add(job.flavor)
            self._epoch += 1
        return reason

    def _borrows(self, job: Job) -> bool:
        if not self.policies.admission.defers_borrowing:
            return False
        key = (job.queue, job.flavor)
        return self.quota.total.get(key, 0) + job.gpus > self.quota.subtree_nominal.get(key, 0)

    def _static_reason(self, job: Job) -> Reason | None:
        key = (job.queue, job.flavor, job.gpus_per_worker, job.gpus)
        if key not in self._static:
            self._static[key] = self._never_fits(job)
        return self._static[key]

    def _never_fits(self, job: Job) -> Reason | None:
        topo, f = self.topo, job.flavor
        if not self.quota.is_leaf(job.queue):
            return Reason.BAD_CONSTRAINTS
        if job.gpus_per_worker > topo.max_gpus_all.get(f, 0) or job.gpus > topo.total_gpus_all.get(
            f, 0
        ):
            return Reason.BAD_CONSTRAINTS
        if job.gpus_per_worker > topo.max_gpus.get(f, 0) or job.gpus > topo.ready_gpus.get(f, 0):
            return Reason.REQ_NODE_NOT_AVAIL
        return None

    def _end_t_s(self, job: Job, start_t_s: float) -> float:
        walltime_s = (
            job.walltime_s if job.walltime_s is not None else self.config.default_walltime_s
        )
        return math.inf if walltime_s is None else start_t_s + walltime_s

    # -- quota and placement -----------------------------------------------------------------

    def _quota_ok(self, job: Job) -> bool:
        key = (job.queue, job.flavor)
        failed_at = self._quota_fail.get(key)
        if failed_at is not None and job.gpus >= failed_at:
            return False
        if self.policies.admission.fits(self.quota, job):
            return True
        self._quota_fail[key] = job.gpus if failed_at is None else min(failed_at, job.gpus)
        return False

    def _usable_holds(self, job: Job) -> int:
        """Bit k set: hold k's GPUs are usable, the job ends before that reservation starts."""
        holds = self._holds_by_flavor.get(job.flavor)
        if not holds:
            return 0
        end_t_s = self._end_t_s(job, self.now_t_s)
        usable = 0
        for k in holds:
            h = self.holds[k]
            if end_t_s <= h.t_s and h.held:
                usable |= 1 << k
        return usable

    def _place(self, shape: Shape, usable: int) -> Masks | None:
        """Place on free GPUs, plus the GPUs of holds this job may use."""
        key = (shape, usable)
        if key in self._place_fail:
            return None
        if usable:
            with self.snap.without([self.holds[k].held for k in bits(usable)]):
                found = self.policies.placement.place(self.snap, shape)
        else:
            found = self.policies.placement.place(self.snap, shape)
        if found is None:
            self._place_fail.add(key)
        return found

    def _start(self, job: Job, masks: Masks) -> None:
        self._epoch += 1
        backfill = False
        for h in self.holds:
            if h.flavor != job.flavor:
                continue
            backfill = backfill or h.t_s > -math.inf
            overlap = {i: h.held[i] & m for i, m in masks.items() if h.held.get(i, 0) & m}
            if overlap:
                self.snap.release(overlap)
                for i, m in overlap.items():
                    h.held[i] &= ~m
        self.snap.take(masks)
        self.started.append((self._end_t_s(job, self.now_t_s), masks))
        borrowing = self._borrows(job)
        self.quota.add(job.queue, job.flavor, job.gpus)
        self.starts.append(
            Start(
                job.id,
                self.topo.placement(masks),
                StartReason.BACKFILL if backfill else StartReason.FITS,
                borrowing,
            )
        )

    def _hold(self, job: Job, t_s: float, end_t_s: float, masks: Masks) -> None:
        self._epoch += 1
        free = self.snap.free_mask
        held = {i: m & free[i] for i, m in masks.items() if m & free[i]}
        self.snap.take(held)
        if t_s > -math.inf:  # a nomination is never usable by other jobs
            self._holds_by_flavor.setdefault(job.flavor, []).append(len(self.holds))
        self.holds.append(Hold(job.id, job.flavor, t_s, end_t_s, dict(masks), held))

    # -- preemption ----------------------------------------------------------------------------

    def _preempt(self, job: Job, shape: Shape) -> bool:
        """Use victims already signalled for this job, or signal the cheapest new set."""
        policies = self.policies
        mine = self.signalled_for.get(job.id, [])
        key = (job.queue, job.priority, shape)
        search = (
            policies.preemption.name != "off"
            and self._searches_left > 0
            and self._queue_searches.get(job.queue, 0) < self.config.preemption_searches_per_queue
            and key not in self._preempt_fail
        )
        if not mine and not search:
            return False

        def fits() -> Masks | None:
            if not policies.admission.fits(self.quota, job):
                return None
            return policies.placement.place(self.snap, shape)

        victims: list[Candidate] = []
        with removed(self.snap, self.quota, mine, [self.run_masks[r.id] for r in mine]):
            found = fits() if mine else None
            if found is None and search:
                self._epoch += 1
                self._searches_left -= 1
                self._queue_searches[job.queue] = self._queue_searches.get(job.queue, 0) + 1
                result = find_victims(
                    job,
                    self._candidates(job),
                    self.snap,
                    self.quota,
                    fits,
                    self.config.exact_victim_search_max,
                    quota_fits=policies.admission.fits(self.quota, job),
                )
                if result is None and not mine:
                    self._preempt_fail.add(key)
                if result is not None:
                    victims, found = result
        if found is None:
            return False
        for c in victims:
            self.signalled.add(c.run.id)
            self.preemptions.append(
                Preempt(c.run.id, c.run.job.checkpoint_grace_s, c.reason, for_job_id=job.id)
            )
        grace_s = max(
            (r.job.checkpoint_grace_s for r in [*mine, *(c.run for c in victims)]), default=0
        )
        self.quota.add(job.queue, job.flavor, job.gpus)
        self._hold(job, -math.inf, self._end_t_s(job, self.now_t_s + grace_s), found)
        return True

    def _candidates(self, job: Job) -> list[Candidate]:
        why = self.policies.preemption.victim_reason
        out: list[Candidate] = []
        for cls, members in self.victim_classes.get(job.flavor, {}).items():
            reason = why(job, members[0].job, self.quota)
            if reason is None:
                continue
            key = (job.flavor, cls, reason)
            cands = self._class_candidates.get(key)
            if cands is None:
                cands = self._class_candidates[key] = [self._candidate(r, reason) for r in members]
            out.extend(c for c in cands if c.run.id not in self.signalled)
        return out

    def _candidate(self, r: RunningJob, reason: PreemptReason) -> Candidate:
        masks = self.run_masks[r.id]
        useful = sum(m.bit_count() for i, m in masks.items() if self.topo.ready[i])
        return Candidate.of(r, masks, reason, self.now_t_s, useful)

    # -- blocked jobs: reason and reservation ------------------------------------------------------

    def _diagnose(self, shape: Shape) -> Reason:
        key = (shape, len(self.starts), len(self.holds))
        cached = self._diagnosed.get(key)
        if cached is not None:
            return cached
        held = [h.held for h in self.holds if h.flavor == shape.flavor and h.held]
        place = self.policies.placement.place
        with self.snap.without(held):
            if held and place(self.snap, shape) is not None:
                reason = Reason.RESERVATION
            elif self.snap.flavor_free.get(shape.flavor, 0) < shape.gpus:
                reason = Reason.RESOURCES
            elif (
                shape.topology is not None
                and shape.topology.mode is TopologyMode.REQUIRED
                and place(self.snap, shape._replace(topology=None)) is not None
            ):
                reason = Reason.TOPOLOGY
            else:
                reason = Reason.FRAGMENTATION
        self._diagnosed[key] = reason
        return reason

    def _reserve(self, job: Job, shape: Shape) -> bool:
        f = job.flavor
        self._epoch += 1
        self._reserve_attempts[f] = self._reserve_attempts.get(f, 0) + 1
        default_s = self.config.default_walltime_s
        blockers: list[Blocker] = [
            (r.end_estimate_t_s(default_s), self.run_masks[r.id]) for r in self.running
        ]
        blockers += self.started
        blockers += [(h.end_t_s, h.full) for h in self.holds]
        found = earliest_start(self.snap, shape, blockers, self.policies.placement, self.now_t_s)
        if found is None:
            return False
        t_s, masks = found
        self._hold(job, t_s, self._end_t_s(job, t_s), masks)
        self.reservations[job.id] = Reservation(job.id, t_s, self.topo.placement(masks))
        return True
