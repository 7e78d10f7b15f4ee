"""What reclaim may take, and what a waiting lender would take back at once.

A high-priority job may evict a job of its own queue and borrow the rest of its GPUs from
another branch (as Kueue allows). If that branch has a job waiting within its own nominal,
the borrowed GPUs are reclaimed at the next cycle, the evicted job starts again on its
queue's quota, and the high-priority job evicts it again, once per lender's job (issue 56
item 5: a job evicted three times by the same preemptor in an over-committed tree). Such an
eviction gains nothing, so it is not made: the preemptor waits for the lender's jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter

from railyard.sched.decisions import PreemptReason
from railyard.sched.model import Job, RunningJob
from railyard.sched.quota import QuotaTree
from railyard.sched.victims import Candidate

_GPUS = attrgetter("gpus")


class Lenders:
    """The pass's waiting jobs by flavor and queue, smallest first, indexed on first use
    (only a found eviction asks, so a pass without one never pays for the index)."""

    def __init__(self, waiting: Sequence[Job], may_run: Callable[[Job], bool]) -> None:
        self._waiting = waiting
        self._may_run = may_run
        self._index: dict[str, list[tuple[str, list[Job]]]] | None = None
        self._lent: dict[str, bool] = {}  # flavor -> does any tree hold a nominal quota of it
        self.gone: set[str] = set()  # started or nominated in this pass: no longer waiting
        self._by_id: dict[str, Job] | None = None

    def _by_flavor(self) -> dict[str, list[tuple[str, list[Job]]]]:
        if self._index is None:
            grouped: dict[str, dict[str, list[Job]]] = {}
            for job in self._waiting:
                grouped.setdefault(job.flavor, {}).setdefault(job.queue, []).append(job)
            self._index = {
                flavor: [(queue, sorted(jobs, key=_GPUS)) for queue, jobs in queues.items()]
                for flavor, queues in grouped.items()
            }
        return self._index

    def taken(self) -> list[Job]:
        """The jobs started or nominated in this pass."""
        if self._by_id is None:
            self._by_id = {job.id: job for job in self._waiting}
        by_id = self._by_id
        return [by_id[job_id] for job_id in self.gone if job_id in by_id]

    def lent(self, quota: QuotaTree, flavor: str) -> bool:
        """Does any tree hold a nominal quota of `flavor`? Without one (a simulation's
        queues) nothing is ever reclaimed, and no eviction needs asking."""
        lent = self._lent.get(flavor)
        if lent is None:
            roots = [q for q, parent in quota.parent.items() if parent is None]
            nominal = quota.subtree_nominal
            lent = self._lent[flavor] = any(nominal.get((q, flavor), 0) for q in roots)
        return lent

    def reclaimer(self, quota: QuotaTree, preemptor: Job) -> Job | None:
        """A waiting job of another queue that may reclaim from the preemptor's queue with
        quota as it stands (the caller counts the preemptor as running, its victims gone).
        Per queue only its smallest waiting job is asked: reclaim needs the reclaimer's
        branch to stay within its nominal, which a larger job of the queue meets no sooner."""
        flavor = preemptor.flavor
        if not self.lent(quota, flavor):
            return None
        for queue, jobs in self._by_flavor().get(flavor, ()):
            if queue == preemptor.queue:
                continue
            for job in jobs:
                if job.id in self.gone or not self._may_run(job):
                    continue
                if quota.reclaimable(preemptor.queue, queue, flavor, job.gpus):
                    return job
                break
        return None


class LoanHolders:
    """Which of a branch's jobs hold its loan: the GPUs of those below a priority, running
    or started in this pass (`Lenders.gone`). Walked only when a reclaim would go beyond a
    loan into a job that outranks the reclaimer; the running jobs once per branch and flavor
    in a pass."""

    def __init__(self, running: Sequence[RunningJob], lenders: Lenders | None) -> None:
        self._running = running
        self._lenders = lenders
        self._held: dict[tuple[str, str], list[tuple[int, int]]] = {}

    def below(self, quota: QuotaTree, branch: str, flavor: str, priority: int) -> int:
        """GPUs of `flavor` that the branch's jobs of lower `priority` hold."""
        paths = quota.paths
        held = self._held.get((branch, flavor))
        if held is None:
            held = self._held[branch, flavor] = [
                (r.job.priority, r.gpus)
                for r in self._running
                if r.job.flavor == flavor and branch in paths.get(r.job.queue, ())
            ]
        total = sum(gpus for p, gpus in held if p < priority)
        for job in self._lenders.taken() if self._lenders is not None else ():
            if job.flavor == flavor and job.priority < priority:
                total += job.gpus if branch in paths.get(job.queue, ()) else 0
        return total


def reclaims_only_borrowed(
    quota: QuotaTree, job: Job, victims: Sequence[Candidate], holders: LoanHolders
) -> bool:
    """Reclaim takes back what a branch borrowed, not more: each branch must still be
    borrowing before its last (largest) reclaimed job goes. A set that takes a branch
    below its nominal (two 1-GPU jobs of a queue borrowing one) let the queue take its
    own quota back by priority, and the two evicted each other for ever. What the set's
    other victims (preemptible jobs taken by priority) free in a branch is no longer
    borrowed: in a tree whose quotas add up to more than the cluster, a gang that took a
    branch's preemptible jobs and then reclaimed the rest left it below its nominal, and
    the branch's high-priority job evicted the gang back (issue 26 item 2).

    A set that goes beyond the loan into a job of higher priority than the reclaimer is
    made only if that job is a borrower itself: not where the branch's jobs of lower
    priority than it hold the whole loan. An 8-GPU job within its queue's nominal, beside
    which a small job had started and borrowed 2, was reclaimed whole by a lower-priority
    job it had evicted by priority before: the two evicted each other (issue 56 item 5, a
    draw of the driven property). Kueue's `reclaimWithinCohort: Any` would take it."""
    sizes: dict[str, list[int]] = {}
    outranking: dict[str, int] = {}  # branch -> least priority of its jobs above the reclaimer
    others: dict[str, int] = {}
    for c in victims:
        branch = quota.branch_between(c.run.job.queue, job.queue)
        if branch is None:
            continue
        if c.reason is PreemptReason.RECLAIM:
            sizes.setdefault(branch, []).append(c.run.gpus)
            priority = c.run.job.priority
            if priority > job.priority:
                outranking[branch] = min(priority, outranking.get(branch, priority))
        else:
            others[branch] = others.get(branch, 0) + c.run.gpus

    def only_borrowed(branch: str, taken: list[int]) -> bool:
        loan = quota.borrowed(branch, job.flavor) - others.get(branch, 0)
        if sum(taken) - max(taken) >= loan:
            return False
        above = outranking.get(branch)
        if above is None or sum(taken) <= loan:
            return True
        return holders.below(quota, branch, job.flavor, above) < loan

    return all(only_borrowed(branch, taken) for branch, taken in sizes.items())
