"""Two fairness baselines from the literature, as ordering policies: max-min fairness across
users, and Themis' finish-time fairness. Neither preempts: they decide who goes next when GPUs
free up (with the backfill policy beside them), which is what a non-preemptive cluster can do.
They read only what the scheduler knows (the GPUs users hold, time limits), so the live loop
may select them too (`SchedulerConfig(ordering="maxmin" | "ftf")`); `railyard simulate`
offers them as policies `maxmin` and `ftf` (with EASY backfill).

- `maxmin`: progressive filling. Each pending job ranks by the GPUs its user would hold if it
  and the user's earlier pending jobs started: the GPUs the user holds now plus those earlier
  jobs' GPUs. The user furthest below the others goes first, one job at a time, so users are
  filled level by level as max-min fairness fills them (Bertsekas & Gallager). The unit is the
  user (a Gavel trace makes each job its own user, where it is max-min across jobs).
- `ftf`: Themis (Mahajan et al., NSDI 2020): a job's finish-time fairness is rho = T_shared /
  T_independent, the time it would take to finish here if it started now (waited so far plus
  its remaining run) over its run alone. The job with the largest rho, the one treated worst,
  goes first. Its run alone is its time limit (its own, else its queue's DefaultTime or
  MaxTime), less the service of earlier attempts. A job under no limit cannot say how unfairly
  it is treated: it goes after every job that can, in arrival order (give queues a DefaultTime
  to rank them all). Themis' auction among apps, and its leases, are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from railyard.sched.limits import queue_time_limit_s
from railyard.sched.model import Job
from railyard.sched.policies.registry import ORDERING, OrderContext, SortKey


@dataclass(frozen=True)
class MaxMinFairness:
    name: str = "maxmin"

    def sort_key(self, ctx: OrderContext) -> SortKey:
        rank = self._filled(ctx)
        return lambda j: (-j.priority, rank.get(j.id, 0), j.submit_t_s, j.tie)

    def _filled(self, ctx: OrderContext) -> dict[str, int]:
        """Job id -> the GPUs its user would hold once it and the user's earlier pending jobs
        ran (progressive filling, in arrival order within a user)."""
        held: dict[str, int] = {}
        for r in ctx.running:
            held[r.job.user] = held.get(r.job.user, 0) + r.gpus
        out: dict[str, int] = {}
        for job in sorted(ctx.pending, key=lambda j: (j.submit_t_s, j.tie)):
            held[job.user] = held.get(job.user, 0) + job.gpus
            out[job.id] = held[job.user]
        return out


@dataclass(frozen=True)
class FinishTimeFairness:
    name: str = "ftf"

    def sort_key(self, ctx: OrderContext) -> SortKey:
        limits = {name: queue_time_limit_s(q) for name, q in ctx.quota.queues.items()}
        now = ctx.now_t_s

        def key(j: Job) -> tuple[object, ...]:
            rho = finish_time_fairness(j, now, limits.get(j.queue))
            known = rho is not None
            return (-j.priority, not known, -(rho or 0.0), j.submit_t_s, j.tie)

        return key


def finish_time_fairness(job: Job, now_t_s: float, queue_limit_s: float | None) -> float | None:
    """Themis' rho for a pending job starting now (None: it has no time limit to go by)."""
    alone_s = job.walltime_s if job.walltime_s is not None else queue_limit_s
    if alone_s is None or alone_s <= 0:
        return None
    gpus = job.workers * job.gpus_per_worker
    done_s = job.attained_gpu_s / gpus if gpus else 0.0
    remaining_s = max(0.0, alone_s - done_s)
    waited_s = max(0.0, now_t_s - job.submit_t_s)
    return (waited_s + remaining_s) / alone_s


ORDERING.add(MaxMinFairness())
ORDERING.add(FinishTimeFairness())
