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
from railyard.sched.model import Job
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


def reclaims_only_borrowed(quota: QuotaTree, job: Job, victims: Sequence[Candidate]) -> bool:
    """Reclaim takes back what a branch borrowed, not more: each branch must still be
    borrowing before its last (largest) reclaimed job goes. A set that takes a branch
    below its nominal (two 1-GPU jobs of a queue borrowing one) let the queue take its
    own quota back by priority, and the two evicted each other for ever. What the set's
    other victims (preemptible jobs taken by priority) free in a branch is no longer
    borrowed: in a tree whose quotas add up to more than the cluster, a gang that took a
    branch's preemptible jobs and then reclaimed the rest left it below its nominal, and
    the branch's high-priority job evicted the gang back (issue 26 item 2). A job of higher
    priority than the reclaimer is taken only for GPUs its branch borrowed, none beyond: an
    8-GPU job whose queue borrowed 2 (a small job started beside it) was reclaimed whole by
    a lower-priority job it had evicted by priority before, the two evicting each other
    (issue 56 item 5, the driven property's draw)."""
    sizes: dict[str, list[int]] = {}
    outranked: set[str] = set()  # branches where a reclaimed job outranks the reclaimer
    others: dict[str, int] = {}
    for c in victims:
        branch = quota.branch_between(c.run.job.queue, job.queue)
        if branch is None:
            continue
        if c.reason is PreemptReason.RECLAIM:
            sizes.setdefault(branch, []).append(c.run.gpus)
            if c.run.job.priority > job.priority:
                outranked.add(branch)
        else:
            others[branch] = others.get(branch, 0) + c.run.gpus

    def only_borrowed(branch: str, taken: list[int]) -> bool:
        left = quota.borrowed(branch, job.flavor) - others.get(branch, 0)
        if branch in outranked:
            return sum(taken) <= left
        return sum(taken) - max(taken) < left

    return all(only_borrowed(branch, taken) for branch, taken in sizes.items())
