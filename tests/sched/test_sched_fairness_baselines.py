"""Issue 56 item 6: max-min fairness and Themis' finish-time fairness as ordering policies in
the same registry as fifo, fairshare and las (sched/policies/fairness.py)."""

from __future__ import annotations

import pytest
from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched.policies import ORDERING
from railyard.sched.policies.fairness import finish_time_fairness


def test_both_are_registered_by_name():
    assert {"maxmin", "ftf"} <= set(ORDERING.names())


def test_maxmin_fills_the_user_holding_least_first():
    """ann holds 3 GPUs, bob 1; one GPU is free. FIFO gives it to ann's older job; max-min
    to bob, the user furthest below."""
    held = [
        running(job("r1", user="ann", gpus=3), "n0:0-2"),
        running(job("r2", user="bob"), "n0:3"),
    ]
    waiting = [job("a", user="ann", submit_t_s=1.0), job("b", user="bob", submit_t_s=2.0)]
    s = state(nodes(1, gpus=5), flat_queues({"a": 5}), waiting, held)
    fifo = schedule(s, 10.0, ordering="fifo", admission="unlimited")
    maxmin = schedule(s, 10.0, ordering="maxmin", admission="unlimited")
    assert [x.job_id for x in fifo.starts] == ["a"]
    assert [x.job_id for x in maxmin.starts] == ["b"]


def test_maxmin_fills_level_by_level_not_user_by_user():
    """Two users with nothing running and three 1-GPU jobs each, four GPUs free: two each,
    where FIFO would start ann's three first."""
    waiting = [job(f"a{i}", user="ann", submit_t_s=float(i)) for i in range(3)]
    waiting += [job(f"b{i}", user="bob", submit_t_s=10.0 + i) for i in range(3)]
    s = state(nodes(1, gpus=4), flat_queues({"a": 8}), waiting)
    started = {x.job_id for x in schedule(s, 20.0, ordering="maxmin", admission="unlimited").starts}
    assert started == {"a0", "a1", "b0", "b1"}


def test_ftf_starts_the_job_its_wait_hurts_most():
    """Both waited an hour; the short job's finish-time fairness is worse (a 1-hour job
    made to wait an hour: rho 2; a 10-hour job: 1.1), so it goes first though it came later."""
    long = job("long", gpus=8, walltime_s=36000.0, submit_t_s=0.0)
    short = job("short", gpus=8, walltime_s=3600.0, submit_t_s=60.0)
    s = state(nodes(1), flat_queues({"a": 8}), [long, short])
    assert finish_time_fairness(short, 3660.0, None) == pytest.approx(2.0)
    assert finish_time_fairness(long, 3660.0, None) == pytest.approx((3660 + 36000) / 36000)
    fifo = schedule(s, 3660.0, ordering="fifo", admission="unlimited")
    ftf = schedule(s, 3660.0, ordering="ftf", admission="unlimited")
    assert [x.job_id for x in fifo.starts] == ["long"]
    assert [x.job_id for x in ftf.starts] == ["short"]


def test_ftf_counts_earlier_attempts_and_ranks_jobs_without_a_limit_last():
    resumed = job("r", gpus=2, walltime_s=1000.0, attained_gpu_s=1200.0)  # 600 s done
    assert finish_time_fairness(resumed, 100.0, None) == pytest.approx((100 + 400) / 1000)
    assert finish_time_fairness(job("x"), 100.0, None) is None
    assert finish_time_fairness(job("y"), 100.0, 50.0) == pytest.approx(3.0)  # queue limit
    unknown = job("u", gpus=8, submit_t_s=0.0)
    known = job("k", gpus=8, walltime_s=3600.0, submit_t_s=5.0)
    s = state(nodes(1), flat_queues({"a": 8}), [unknown, known])
    assert [x.job_id for x in schedule(s, 10.0, ordering="ftf", admission="unlimited").starts] == [
        "k"
    ]
