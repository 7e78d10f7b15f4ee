"""A trace's offered load, and its arrivals rescaled to another (`simulate --trace --load`).

Offered load is GPU time demanded per unit of time over the cluster's GPUs: the arrival rate
(jobs per second, from the first arrival to the last: `n - 1` gaps over the span) times the
mean GPU-seconds a job needs, over the cluster's GPUs. Gavel and Tiresias vary load the same
way: the jobs stay as recorded (sizes, run times, order) and every inter-arrival gap is
scaled by one factor, so the rate, and with it the load, becomes the one asked for.
"""

from __future__ import annotations

from dataclasses import replace

from railyard.sim.workload import TraceJob, Workload


def offered_load(workload: Workload, cluster_gpus: int) -> float | None:
    """GPU-hours demanded per hour over `cluster_gpus`; None where there is no rate (fewer
    than two jobs, or all arriving at one instant)."""
    jobs = workload.jobs
    if len(jobs) < 2 or cluster_gpus < 1:
        return None
    span_s = jobs[-1].submit_s - jobs[0].submit_s
    if span_s <= 0:
        return None
    rate_per_s = (len(jobs) - 1) / span_s
    return rate_per_s * workload.gpu_s() / len(jobs) / cluster_gpus


def rescale_load(workload: Workload, cluster_gpus: int, load: float) -> Workload:
    """`workload` with its inter-arrival gaps scaled so its offered load is `load`.

    Raises ValueError (one line, with a hint) where it cannot: no rate to scale, a load that
    is not a positive number, or jobs that need no GPU time."""
    if not load > 0 or load == float("inf"):
        raise ValueError(f"--load: {load} is not a load (hint: a number > 0, e.g. 0.9)")
    now = offered_load(workload, cluster_gpus)
    if now is None:
        raise ValueError(
            f"--load: the trace {workload.name!r} has no arrival rate to rescale (fewer than "
            "two jobs, or all arrive at once) (hint: leave --load out for this trace)"
        )
    if now == 0:
        raise ValueError(
            f"--load: the trace {workload.name!r} demands no GPU time (every run time is 0) "
            "(hint: leave --load out for this trace)"
        )
    factor = now / load  # gaps grow where the asked load is lower
    t0 = workload.jobs[0].submit_s
    return Workload.of(workload.name, [_moved(j, t0, factor) for j in workload.jobs],
                       workload.skipped)  # fmt: skip


def _moved(job: TraceJob, t0: float, factor: float) -> TraceJob:
    """The job arriving at its scaled time; a --deadline keeps its distance from submission."""
    submit_s = t0 + (job.submit_s - t0) * factor
    if job.deadline_s is None:
        return replace(job, submit_s=submit_s)
    return replace(job, submit_s=submit_s, deadline_s=submit_s + job.deadline_s - job.submit_s)
