"""Time slicing's own defaults (`SchedulerConfig.of`, `TIME_SLICING_DEFAULTS`): a finer ladder
of service levels, room to search victims for several gangs a cycle, and a hold for a gang
blocked 6 h. Each test also runs the knobs of two rounds ago (`R2`) and shows what they did.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from sched_fakes import flat_queues, job, nodes, running, state

from railyard.sched import ClusterState, PreemptReason, SchedulerConfig, cycle
from railyard.sched.config import TIME_SLICING_DEFAULTS

LAS = {"ordering": "las", "backfill": "none", "preemption": "las"}
R2 = {  # time slicing's knobs two rounds ago
    "time_slice_by": "attained",
    "starved_unsliced_s": 0.0,
    "service_levels_gpu_s": (3600.0, 86_400.0),
    "preemption_searches_per_queue": 1,
    "preemption_searches_per_cycle": 16,
    "greedy_hold_after_s": None,
    "slice_level_gap": 1,  # any lower level slices (a gap of 3 since issue 56)
    "unsliced_after_restarts": None,  # no restart budget (6 since issue 56)
}
R3 = {  # the last round: attained service on a finer ladder (now `time_slice_by`'s other)
    "time_slice_by": "attained",
    "starved_unsliced_s": 0.0,
    "service_levels_gpu_s": (3600.0, 8 * 3600.0, 64 * 3600.0),
    "slice_level_gap": 1,
    "unsliced_after_restarts": None,
}
HOUR = 3600.0


def las(s: ClusterState, now_t_s: float, **knobs: object):
    return cycle(s, now_t_s, SchedulerConfig.of(**LAS, **knobs))  # type: ignore[arg-type]


def test_time_slicing_takes_its_defaults_and_named_knobs_win():
    sliced = SchedulerConfig.of(**LAS)
    for name, value in TIME_SLICING_DEFAULTS.items():
        assert getattr(sliced, name) == value, name
    assert SchedulerConfig.of(**LAS, greedy_hold_after_s=None).greedy_hold_after_s is None
    # the other policies keep the field defaults
    assert SchedulerConfig.of(ordering="fairshare") == SchedulerConfig(ordering="fairshare")
    assert SchedulerConfig().preemption_searches_per_queue == 1


def test_two_gangs_of_one_queue_slice_in_the_same_cycle():
    """Two nodes held by long runners; two new 8-GPU gangs of queue a wait. One victim
    search per queue and cycle made the second gang wait a cycle per gang ahead of it.
    (Admission unlimited, as in the simulator: under a quota of 16, a victim still stopping
    counts against it this cycle, and the second gang slices in the next.)"""
    runners = [
        running(
            job(f"long{i}", gpus=8, preemptible=True, walltime_s=7 * 24 * HOUR),
            f"n{i}:0-7",
            start_t_s=0.0,
        )
        for i in range(2)
    ]
    new = [job(f"new{i}", gpus=8, submit_t_s=650.0 + i, walltime_s=HOUR) for i in range(2)]
    s = state(nodes(2), flat_queues({"a": 16}), new, runners)
    now = las(s, 700.0, admission="unlimited")
    assert sorted(p.for_job_id for p in now.preemptions) == ["new0", "new1"]
    before = las(s, 700.0, admission="unlimited", **R2)
    assert [p.for_job_id for p in before.preemptions] == ["new0"]


@pytest.mark.parametrize("service_h", [2.0, 7.0])
def test_a_gang_with_hours_of_service_slices_one_with_days(service_h: float):
    """A waiting gang with a few GPU-hours, a running one with 20 (2.5 h on 8 GPUs): under
    1 and 24 GPU-hour thresholds both sat in the middle level and neither could slice the
    other; the ladder 1, 8, 64 tells them apart (attained service, the round before this).
    Ranked by remaining service neither has a time limit: both are cut on their service
    (they tied on the last level and neither sliced before issue 56). On the doubling ladder
    the running gang (20 GPU-h) is on level 5, the waiting one on level 2 (2 GPU-h) or 3 (7):
    under the default gap of 3 levels only the first slices it (`slice_level_gap`)."""
    long = running(
        job("long", gpus=8, preemptible=True, attained_gpu_s=20 * HOUR - 8 * 700.0),
        "n0:0-7",
        start_t_s=0.0,
    )
    waiting = job("waiting", gpus=8, submit_t_s=600.0, attained_gpu_s=service_h * HOUR)
    s = state(nodes(1), flat_queues({"a": 8}), [waiting], [long])
    now = las(s, 700.0, **R3)
    assert [(p.job_id, p.reason) for p in now.preemptions] == [("long", PreemptReason.TIME_SLICE)]
    assert las(s, 700.0, **R2).preemptions == ()
    sliced = [(p.job_id, p.reason) for p in las(s, 700.0).preemptions]
    assert sliced == ([("long", PreemptReason.TIME_SLICE)] if service_h < 4 else [])
    assert [p.job_id for p in las(s, 700.0, slice_level_gap=1).preemptions] == ["long"]


def test_a_gang_blocked_six_hours_holds_what_it_needs():
    """A 1-GPU job (not preemptible, ends in an hour) keeps the node from an 8-GPU gang that
    has waited 7 h; a new 1-GPU job with no time limit arrives. Greedy time slicing used to
    let it take the gap, so the gang waited on; now the gang holds the node."""
    blocker = running(job("blocker", walltime_s=8 * HOUR), "n0:0", start_t_s=0.0)
    gang = job("gang", gpus=8, submit_t_s=0.0)
    small = job("small", submit_t_s=7 * HOUR)
    s = state(nodes(1), flat_queues({"a": 8}), [gang, small], [blocker])
    now = las(s, 7 * HOUR + 60)
    assert now.starts == ()
    assert list(now.reservations) == ["gang"]
    before = las(s, 7 * HOUR + 60, **R2)
    assert [x.job_id for x in before.starts] == ["small"]
    # a gang blocked less than 6 h holds nothing yet
    young = replace(s, pending=(replace(gang, submit_t_s=2 * HOUR), small))
    assert [x.job_id for x in las(young, 7 * HOUR + 60).starts] == ["small"]
