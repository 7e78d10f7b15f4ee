"""The sizes a site allows one job (``railyard up --max-tasks-per-job`` /
``--max-array-size``) and one user (``--max-jobs-per-user``), whatever its nodes could hold,
and whether it refuses by queue quota.
:func:`railyard.control.usecases.booking.book` applies them at submit, beside what the
cluster's nodes could ever hold; every way in (the route, the fast submit, the group commit,
a batch, an array, the CLI through the API) admits through ``admission.admit``, so every one
applies them.
"""

from __future__ import annotations

from dataclasses import dataclass

from railyard.client.bounds import (
    DEFAULT_MAX_JOBS_PER_USER,
    DEFAULT_MAX_TASKS_PER_JOB,
    INT32_MAX,
    MAX_JOB_GPUS,
)
from railyard.client.values import MAX_ARRAY_TASKS


@dataclass(frozen=True)
class SiteLimits:
    """The sizes a site allows one job, whatever its nodes could hold (Slurm's
    ``MaxArraySize``, counted in tasks here: the count is what costs work)."""

    max_tasks_per_job: int = DEFAULT_MAX_TASKS_PER_JOB
    max_array_size: int = MAX_ARRAY_TASKS
    max_jobs_per_user: int = DEFAULT_MAX_JOBS_PER_USER  # a plain user's, pending or running
    # The loop admits by queue quota (`SchedulerConfig.admission`): `railyard up` says so;
    # an API made without its loop's policy does not refuse by quota.
    queue_quotas: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.max_tasks_per_job <= MAX_JOB_GPUS:
            raise ValueError(f"max_tasks_per_job: 1 to {MAX_JOB_GPUS}")
        if not 1 <= self.max_array_size <= MAX_ARRAY_TASKS:
            raise ValueError(f"max_array_size: 1 to {MAX_ARRAY_TASKS}")
        if not 1 <= self.max_jobs_per_user <= INT32_MAX:
            raise ValueError(f"max_jobs_per_user: 1 to {INT32_MAX}")


DEFAULT_LIMITS = SiteLimits()
