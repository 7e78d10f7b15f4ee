"""Time slicing's `unsliced_after_s` (issue 56): a job that has run that long in all, over its
attempts, is not sliced again and runs to its end. Under attained service every newcomer
slices the longest jobs, and they set the p99 JCT: on Gavel's Philly VC ee9e8c `las`'s p99
was 1.33x fairshare+easy's, its 1-GPU jobs of 400-800 h each sliced 3-52 times."""

from __future__ import annotations

import pytest
from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched import ClusterState, PreemptReason, Reason, SchedulerConfig

HOUR = 3600.0
LAS = {"ordering": "las", "preemption": "las", "time_slice_by": "attained"}


def long_runner(ran_before_h: float, ran_now_h: float) -> tuple[ClusterState, float]:
    """`long` (8 GPUs) ran `ran_before_h` in earlier attempts and `ran_now_h` in this one;
    `new` (8 GPUs, no service) waits for its node."""
    now_t_s = 1000 * HOUR
    long = job("long", gpus=8, preemptible=True, attained_gpu_s=8 * ran_before_h * HOUR)
    run = running(long, "n0:0-7", start_t_s=now_t_s - ran_now_h * HOUR)
    new = job("new", gpus=8, submit_t_s=now_t_s - 60.0)
    return state(nodes(1), flat_queues({"a": 8}), [new], [run]), now_t_s


@pytest.mark.parametrize(
    ("ran_before_h", "ran_now_h", "sliced"),
    [
        (0.0, 23.0, True),  # 23 h in all: sliced as any other
        (0.0, 25.0, False),  # 25 h in this attempt
        (20.0, 3.0, True),  # 23 h over two attempts
        (20.0, 5.0, False),  # 25 h over two attempts: earlier attempts count
    ],
)
def test_a_job_that_has_run_the_limit_in_all_is_not_sliced(
    ran_before_h: float, ran_now_h: float, sliced: bool
):
    s, now_t_s = long_runner(ran_before_h, ran_now_h)
    result = schedule(s, now_t_s, **LAS, unsliced_after_s=24 * HOUR)
    got = [(p.job_id, p.reason) for p in result.preemptions]
    assert got == ([("long", PreemptReason.TIME_SLICE)] if sliced else [])
    if not sliced:
        assert result.pending_reasons["new"] is Reason.RESOURCES
    # without the limit the least-served job slices it whatever it has run
    plain = schedule(s, now_t_s, **LAS, unsliced_after_s=None)
    assert [p.job_id for p in plain.preemptions] == ["long"]


def test_the_limit_must_be_finite_and_not_negative():
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="unsliced_after_s"):
            SchedulerConfig(unsliced_after_s=bad)
