"""The `las` policy (Tiresias' discretized least attained service): who is sliced, and who not.

Thresholds are the defaults (1 GPU-hour, 1 GPU-day) and the quantum 600 s: an 8-GPU job that
has run 700 s has 5,600 GPU-s of service, level 1, above a new job's level 0.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched import ClusterState, PreemptReason, Reason

LAS = {"ordering": "las", "preemption": "las"}


def one_node_taken(now_t_s: float = 700.0, **victim: object) -> tuple[ClusterState, float]:
    """`long` (8 GPUs, started at 0) holds the node; `new` (8 GPUs, no service) waits."""
    victim.setdefault("preemptible", True)
    long = running(job("long", gpus=8, **victim), "n0:0-7", start_t_s=0.0)
    s = state(nodes(1), flat_queues({"a": 8}), [job("new", gpus=8, submit_t_s=650.0)], [long])
    return s, now_t_s


def test_a_job_with_less_service_slices_a_long_runner():
    s, now_t_s = one_node_taken()
    result = schedule(s, now_t_s, **LAS)
    assert [(p.job_id, p.reason, p.for_job_id) for p in result.preemptions] == [
        ("long", PreemptReason.TIME_SLICE, "new")
    ]
    assert result.pending_reasons["new"] is Reason.PREEMPTING


@pytest.mark.parametrize(
    ("victim", "now_t_s", "why"),
    [
        ({"preemptible": False}, 700.0, "submitted not preemptible: never sliced"),
        ({}, 500.0, "ran less than the 600 s quantum in this attempt"),
        ({"priority": 10}, 700.0, "higher priority than the waiting job"),
    ],
)
def test_who_is_not_sliced(victim: dict[str, object], now_t_s: float, why: str):
    s, _ = one_node_taken(**victim)
    result = schedule(s, now_t_s, **LAS)
    assert result.preemptions == (), why
    assert result.pending_reasons["new"] is Reason.RESOURCES


def test_no_slice_between_jobs_of_the_same_service_level():
    """Both past the first threshold: slicing would only trade one restart for another."""
    s, now_t_s = one_node_taken()
    served = replace(s.pending[0], attained_gpu_s=4000.0)
    result = schedule(replace(s, pending=(served,)), now_t_s, **LAS)
    assert result.preemptions == ()


def test_least_served_job_goes_first_whatever_its_arrival():
    """Two waiting 8-GPU jobs, one free node: the one with less service starts though it
    arrived later; under fifo the earlier one starts."""
    early = job("early", gpus=8, submit_t_s=0.0, attained_gpu_s=7200.0)
    late = job("late", gpus=8, submit_t_s=50.0)
    s = state(nodes(1), flat_queues({"a": 8}), [early, late])
    assert [x.job_id for x in schedule(s, 100.0, **LAS).starts] == ["late"]
    assert [x.job_id for x in schedule(s, 100.0, ordering="fifo").starts] == ["early"]


def test_slicing_never_takes_quota_the_preemptor_may_not_use():
    """`new` is in queue b with no quota and no borrowing; `long` runs in a: b may not slice it
    (quotas hold under time slicing)."""
    long = running(job("long", gpus=8, preemptible=True), "n0:0-7", start_t_s=0.0)
    queues = flat_queues({"a": 8, "b": 0}, borrow={"b": 0})
    s = state(nodes(1), queues, [job("new", queue="b", gpus=8, submit_t_s=650.0)], [long])
    result = schedule(s, 700.0, **LAS)
    assert result.preemptions == ()
