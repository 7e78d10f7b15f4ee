"""Starvation reads the time a job waited, not its time in the system (issue 56): a job that
ran for days in earlier attempts, then was sliced or preempted, did not wait those days.
Read from its submission, on Gavel's Philly-derived traces at load 1 most jobs were past a
7-day limit, and the starving tier (oldest first, run to the end) made `las` FIFO."""

from __future__ import annotations

from sched_fakes import flat_queues, job, nodes, state

from railyard.sched import SchedulerConfig, cycle
from railyard.sched.model import starving_since_t_s

DAY = 86_400.0
LIMIT = {"starvation_limit_s": 7 * DAY}


def test_time_run_in_earlier_attempts_does_not_age_a_job():
    served = job("served", gpus=8, submit_t_s=0.0, attained_gpu_s=6 * DAY * 8)
    assert starving_since_t_s(served) == 6 * DAY
    assert starving_since_t_s(job("fresh", gpus=8, submit_t_s=5.0)) == 5.0
    gpuless = job("cpu", gpus=0, submit_t_s=5.0, attained_gpu_s=0.0)
    assert starving_since_t_s(gpuless) == 5.0


def test_a_job_that_ran_six_of_its_eight_days_is_not_starving():
    """Submitted 8 days ago, it ran 6 of them (48 GPU-days on 8 GPUs) and has waited 2: under
    time slicing a new job of less service goes first. Aged from its submission it was
    starving and went ahead of every level."""
    now = 8 * DAY
    served = job("served", gpus=8, preemptible=True, submit_t_s=0.0, attained_gpu_s=6 * DAY * 8)
    new = job("new", gpus=8, submit_t_s=now - 3600.0)
    s = state(nodes(1), flat_queues({"a": 8}), [served, new])
    config = SchedulerConfig.of(
        ordering="las", backfill="none", preemption="las", time_slice_by="attained", **LIMIT
    )
    assert [x.job_id for x in cycle(s, now, config).starts] == ["new"]
    # one that never ran, of the same age, is starving and goes first
    never = job("never", gpus=8, submit_t_s=0.0)
    s2 = state(nodes(1), flat_queues({"a": 8}), [never, new])
    assert [x.job_id for x in cycle(s2, now, config).starts] == ["never"]
    # and the served one starves once it has waited the limit itself
    later = 13 * DAY + 60
    assert [x.job_id for x in cycle(s, later, config).starts] == ["served"]
