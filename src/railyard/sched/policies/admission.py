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
    """Only physical capacity limits a queue; for single-tenant clusters and what-ifs."""

    name: str = "unlimited"
    defers_borrowing: bool = False

    def fits(self, quota: QuotaTree, job: Job) -> bool:
        return True


ADMISSION.add(QuotaAdmission())
ADMISSION.add(Unlimited())
