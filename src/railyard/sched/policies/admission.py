"""Admission policies: hierarchical quota with borrowing (Kueue-like), or none at all."""

from __future__ import annotations

from dataclasses import dataclass

from railyard.sched.model import Job
from railyard.sched.policies.registry import ADMISSION
from railyard.sched.quota import QuotaTree


@dataclass(frozen=True)
class QuotaAdmission:
    """Nominal quota plus what the cohort can lend, within borrowing and lending limits."""

    name: str = "quota"
    defers_borrowing: bool = True

    def fits(self, quota: QuotaTree, job: Job) -> bool:
        return quota.fits(job.queue, job.flavor, job.gpus)


@dataclass(frozen=True)
class Unlimited:
    """Only physical capacity limits a queue; for single-tenant clusters and what-ifs.
    Reclaim still gives each queue its nominal quota back, so jobs that could be reclaimed
    wait for the others, as under quota: a borrower that started first took GPUs a job
    within its nominal then reclaimed, and two jobs evicted each other (issue 56 item 5).
    Queues without a nominal (a simulation's) defer nothing."""

    name: str = "unlimited"
    defers_borrowing: bool = True

    def fits(self, quota: QuotaTree, job: Job) -> bool:
        return True


ADMISSION.add(QuotaAdmission())
ADMISSION.add(Unlimited())
