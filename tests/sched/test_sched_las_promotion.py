"""Time slicing's promotion (`promotion_wait_ratio`, issue 56): a job that has run, then
waited in all at least that ratio times the time it ran, ranks on the first level, pending
or running, until its run time catches up with its waiting over the ratio. Without it a long
job sliced at load 1 waited behind every newer job: on Gavel's Philly VCs b436b2 and ee9e8c
`las`'s p99 JCT was 1.64x and 1.36x fairshare+easy's."""

from __future__ import annotations

import pytest
from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched import PreemptReason, SchedulerConfig
from railyard.sched.policies.registry import pending_promoted, promoted

HOUR = 3600.0
LAS = {"ordering": "las", "preemption": "las", "time_slice_by": "attained"}


def test_promoted_reads_waiting_over_run_time():
    assert promoted(waited_s=10 * HOUR, ran_s=10 * HOUR, ratio=1.0)
    assert not promoted(waited_s=9 * HOUR, ran_s=10 * HOUR, ratio=1.0)
    assert promoted(waited_s=5 * HOUR, ran_s=10 * HOUR, ratio=0.5)
    assert not promoted(waited_s=99 * HOUR, ran_s=0.0, ratio=1.0), "never ran: never promoted"
    assert not promoted(waited_s=99 * HOUR, ran_s=1.0, ratio=None), "off"


def test_a_pending_job_is_promoted_by_its_own_waiting():
    """Ran 10 h on 8 GPUs (submitted at 0): at 15 h it has waited 5 h, at 20 h 10 h."""
    served = job("served", gpus=8, submit_t_s=0.0, attained_gpu_s=10 * HOUR * 8)
    assert not pending_promoted(served, 15 * HOUR, 1.0)
    assert pending_promoted(served, 20 * HOUR, 1.0)
    assert pending_promoted(served, 15 * HOUR, 0.5)
    assert not pending_promoted(served, 20 * HOUR, None)


def test_a_promoted_job_goes_before_a_newer_one_of_less_service():
    """`served` ran 10 h and has waited 10 h; `new` has no service. Without promotion the
    least served starts; with ratio 1 `served` ranks on level 0 too, and arrived first."""
    now = 20 * HOUR
    served = job("served", gpus=8, preemptible=True, submit_t_s=0.0, attained_gpu_s=80 * HOUR)
    new = job("new", gpus=8, submit_t_s=now - 60.0)
    s = state(nodes(1), flat_queues({"a": 8}), [served, new])
    assert [x.job_id for x in schedule(s, now, **LAS).starts] == ["new"]
    ratio = {**LAS, "promotion_wait_ratio": 1.0}
    assert [x.job_id for x in schedule(s, now, **ratio).starts] == ["served"]
    # an hour sooner it had waited 9 h of its 10 h run: not yet
    assert [x.job_id for x in schedule(s, now - HOUR, **ratio).starts] == ["new"]


@pytest.mark.parametrize(
    ("now_t_s", "sliced"),
    [
        (25 * HOUR, False),  # ran 15 h in all, waited 10 h: 10 >= 0.5 x 15, still promoted
        (41 * HOUR, True),  # ran 31 h in all: 10 < 0.5 x 31, back on its level
    ],
)
def test_a_promoted_runner_is_not_sliced_till_its_run_catches_up(now_t_s: float, sliced: bool):
    """`long`, submitted at 0, ran 10 h, waited 10 h and started again at 20 h: at ratio 0.5
    it stays promoted while it has run at most 20 h in all, and a new job of no service
    waits for it; after that it is back on its service's level and is sliced."""
    long = job("long", gpus=8, preemptible=True, submit_t_s=0.0, attained_gpu_s=80 * HOUR)
    run = running(long, "n0:0-7", start_t_s=20 * HOUR)
    s = state(nodes(1), flat_queues({"a": 8}), [job("new", gpus=8, submit_t_s=now_t_s - 60)], [run])
    result = schedule(s, now_t_s, **LAS, promotion_wait_ratio=0.5)
    got = [(p.job_id, p.reason) for p in result.preemptions]
    assert got == ([("long", PreemptReason.TIME_SLICE)] if sliced else [])
    # without promotion it is sliced either way (it is on a higher level than `new`)
    plain = schedule(s, now_t_s, **LAS)
    assert [p.job_id for p in plain.preemptions] == ["long"]


def test_the_ratio_must_be_positive():
    with pytest.raises(ValueError, match="promotion_wait_ratio"):
        SchedulerConfig(promotion_wait_ratio=0.0)
    with pytest.raises(ValueError, match="promotion_wait_ratio"):
        SchedulerConfig(promotion_wait_ratio=float("inf"))
