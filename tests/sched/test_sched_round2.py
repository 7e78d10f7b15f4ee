"""Regression tests for the scheduler bugs of round 2, each built from its reported scenario."""

from __future__ import annotations

from dataclasses import replace

import pytest
from lifecycle_driver import drive
from sched_fakes import H100, flat_queues, job, nodes, running, schedule, state

from railyard.sched import (
    ClusterState,
    Level,
    PreemptReason,
    Queue,
    Reason,
    SchedulerConfig,
    StartReason,
    TopologyMode,
    TopologyRequirement,
    estimate_start_t_s,
)

LG = TopologyRequirement(Level.LEAF_GROUP, TopologyMode.REQUIRED)


def lender_and_borrower(*, priority_preemption: bool = True) -> list[Queue]:
    """Queue b owns the node's 8 GPUs; queue c owns none and must borrow."""
    return [
        Queue("org"),
        Queue("b", "org", {H100: 8}, priority_preemption=priority_preemption),
        Queue("c", "org", {H100: 0}, priority_preemption=priority_preemption),
    ]


# -- 1. no preemption ping-pong ----------------------------------------------------------------


def test_reclaim_and_priority_do_not_ping_pong():
    """r (queue c, priority 10) runs on quota borrowed from b; p (queue b, priority 0,
    preemptible) reclaims it. Requeued, r must not evict p by priority: p would reclaim
    straight back. Before the fix this alternated forever; now r waits for p to finish."""
    r = running(job("r", "c", gpus=8, priority=10, walltime_s=1000), "n0:0-7")
    p = job("p", "b", gpus=8, priority=0, preemptible=True, walltime_s=100, submit_t_s=5)
    s = state(nodes(1), lender_and_borrower(), [p], [r])
    run = drive(s, SchedulerConfig(), runtime_s={"r": 1000, "p": 100}, until_t_s=2000)
    assert run.kinds("preempt") == [(0.0, "r", "p")]  # the reclaim, once
    starts = [(t, j) for t, j, _ in run.kinds("start")]
    assert starts == [(10.0, "p"), (110.0, "r")]
    assert run.ended == {"p": "completed", "r": "completed"}


# -- 2. a job that can never be placed blocks nobody ---------------------------------------------


@pytest.mark.parametrize(
    ("never", "why"),
    [
        (job("never", gpus=8, workers=3, topology=LG), "3 nodes in one 2-node leaf group"),
        (job("never", gpus=5, workers=5), "five 5-GPU workers on four 8-GPU nodes"),
    ],
)
@pytest.mark.parametrize("backfill", ["strict", "none", "easy"])
def test_a_job_that_can_never_be_placed_blocks_nobody(never, why, backfill):
    later = [job(f"j{i}", gpus=8, submit_t_s=10.0 + i) for i in range(2)]
    s = state(nodes(4, per_lg=2), flat_queues({"a": 64}), [never, *later])
    for now in (0.0, 30 * 24 * 3600.0):  # also once `never` is far past the starvation limit
        result = schedule(s, now, backfill=backfill)
        assert result.pending_reasons == {"never": Reason.UNSCHEDULABLE}, why
        assert sorted(x.job_id for x in result.starts) == ["j0", "j1"]


def test_more_than_a_queue_may_ever_use_is_unschedulable():
    queues = flat_queues({"a": 8, "b": 56}, borrow={"a": 0})
    result = schedule(state(nodes(8), queues, [job("big", "a", gpus=8, workers=2)]))
    assert result.pending_reasons == {"big": Reason.UNSCHEDULABLE}


# -- 3. borrowed quota is reclaimed, and jobs cannot make themselves immune ------------------


def test_a_hopeless_job_does_not_spend_its_queues_victim_search():
    """b lent its 8 GPUs to a. b's first job asks 16 (more than b's nominal: it can reclaim
    nothing); its second asks 8 and reclaims them, in the same cycle."""
    queues = flat_queues({"a": 8, "b": 8})
    run = [
        running(job("a0", "a", gpus=8), "n0:0-7"),
        running(job("a1", "a", gpus=8), "n1:0-7"),
    ]
    pending = [job("b-big", "b", gpus=8, workers=2), job("b-ok", "b", gpus=8, submit_t_s=1.0)]
    result = schedule(state(nodes(2), queues, pending, run), 100.0)
    assert [(p.reason, p.for_job_id) for p in result.preemptions] == [
        (PreemptReason.RECLAIM, "b-ok")
    ]


def test_queues_bound_min_runtime_and_grace():
    """`immune` borrows a's GPUs and claims a billion seconds of protection and grace: a
    reclaims nothing, until b's admin bounds both; then it yields with b's grace."""
    queues = [Queue("org"), Queue("a", "org", {H100: 8}), Queue("b", "org", {H100: 0})]
    immune = job("immune", "b", gpus=8, min_runtime_s=1e9, checkpoint_grace_s=1e9)
    s = state(nodes(1), queues, [job("reclaim", "a", gpus=8)], [running(immune, "n0:0-7")])
    assert schedule(s, 100.0).preemptions == ()
    bounded = (
        queues[0],
        queues[1],
        replace(queues[2], max_min_runtime_s=60.0, max_checkpoint_grace_s=30.0),
    )
    preempts = schedule(replace(s, queues=bounded), 100.0).preemptions
    assert [(p.job_id, p.grace_s, p.reason) for p in preempts] == [
        ("immune", 30.0, PreemptReason.RECLAIM)
    ]


# -- 4. the GPUs a preemption frees go to the job it was for ---------------------------------------


def test_freed_gpus_are_held_for_the_preemptor_across_cycles():
    """p reclaimed v's GPUs. When v has stopped, another queue's job that orders before p
    (it has used nothing) must not take them: p is nominated and admitted first."""
    queues = flat_queues({"a": 0, "b": 8, "x": 8})
    p = job("p", "b", gpus=8, submit_t_s=10.0, nominated=True)
    rival = job("rival", "x", gpus=8, submit_t_s=0.0)  # earlier, and fair share prefers x
    s = state(nodes(1), queues, [rival, p], [])
    result = schedule(s, 100.0)
    assert [x.job_id for x in result.starts] == ["p"]
    assert result.pending_reasons == {"rival": Reason.RESOURCES}


def test_a_preemptor_keeps_its_victims_gpus_while_they_stop():
    queues = flat_queues({"a": 0, "b": 8})
    v = running(job("v", "a", gpus=8), "n0:0-7", preempt_for="p")
    result = schedule(state(nodes(1), queues, [job("p", "b", gpus=8)], [v]), 100.0)
    assert result.preemptions == ()
    assert result.nominated == frozenset({"p"})
    assert result.pending_reasons == {"p": Reason.PREEMPTING}


# -- 5. EASY reserves without user walltimes -----------------------------------------------------


def test_queue_default_time_gives_easy_its_reservation():
    """A 16-GPU gang behind a stream of small jobs with no --time: with no estimate there is
    no reservation (EASY degrades to greedy); a queue DefaultTime gives one."""
    small = [
        running(job(f"s{i}", gpus=4), f"n{i % 2}:{4 * (i // 2)}-{4 * (i // 2) + 3}")
        for i in range(3)
    ]
    pending = [job("gang", gpus=8, workers=2), job("late", gpus=4, submit_t_s=50.0)]
    s = state(nodes(2), flat_queues({"a": 16}), pending, small)
    greedy = schedule(s, 100.0)
    assert greedy.reservations == {}
    assert [x.job_id for x in greedy.starts] == ["late"]
    timed = [replace(q, default_time_s=3600.0) if q.name == "a" else q for q in s.queues]
    easy = schedule(replace(s, queues=tuple(timed)), 100.0)
    assert easy.reservations["gang"].t_s == 3600.0
    assert easy.starts == ()  # late would run 3,600 s past the reservation
    assert easy.pending_reasons == {"gang": Reason.RESOURCES, "late": Reason.PRIORITY}


def test_history_estimates_give_easy_its_reservation():
    small = [running(job(f"s{i}", gpus=4, user="u"), f"n0:{4 * i}-{4 * i + 3}") for i in range(2)]
    s = state(nodes(1), flat_queues({"a": 8}), [job("big", gpus=8)], small)
    assert schedule(s, 10.0).reservations == {}
    learned = replace(s, runtime_history_s={("a", "u"): 600.0, ("a", None): 900.0})
    assert schedule(learned, 10.0).reservations["big"].t_s == 600.0


@pytest.mark.parametrize(("default_time_s", "walltime_s"), [(3600.0, None), (None, 3600.0)])
def test_max_time_keeps_a_job_waiting_with_partition_time_limit(default_time_s, walltime_s):
    queues = [
        Queue("org"),
        Queue("a", "org", {H100: 8}, default_time_s=default_time_s, max_time_s=1800.0),
    ]
    result = schedule(state(nodes(1), queues, [job("long", walltime_s=walltime_s)]))
    if walltime_s is None:  # DefaultTime above MaxTime is the admin's business: it runs
        assert [x.job_id for x in result.starts] == ["long"]
    else:
        assert result.pending_reasons == {"long": Reason.PARTITION_TIME_LIMIT}


# -- 6. time limits are enforced; estimates never say "now" for a busy GPU ----------------


def test_a_job_past_its_limit_is_stopped_and_ends_timeout():
    s = state(nodes(1), flat_queues({"a": 8}), [job("late", gpus=8, walltime_s=100)])
    run = drive(s, SchedulerConfig(), runtime_s={"late": 5000}, until_t_s=300)
    assert run.kinds("timeout") == [(100.0, "late", "")]
    assert run.ended == {"late": "timeout"}


def test_an_overrun_estimate_is_pushed_out_not_answered_now():
    busy = running(job("busy", gpus=8, user="u"), "n0:0-7", start_t_s=0.0)
    s = replace(
        state(nodes(1), flat_queues({"a": 8}), [], [busy]),
        runtime_history_s={("a", "u"): 100.0},
    )
    assert estimate_start_t_s(s, job("next", gpus=8), 50.0) == 100.0
    assert estimate_start_t_s(s, job("next", gpus=8), 300.0) == 400.0  # doubled twice
    hard = replace(s, running=(running(job("busy", gpus=8, walltime_s=100.0), "n0:0-7"),))
    assert estimate_start_t_s(hard, job("next", gpus=8), 300.0) == 300.0 + 30.0  # KillWait


# -- 7. reservations when quota is what blocks, and Slurm's reasons --------------------------------


def test_the_default_single_queue_reserves_for_a_big_job_behind_small_ones():
    """One queue owns all 8 GPUs, so quota fails whenever a GPU is busy. The 8-GPU job must
    still get a reservation (reason Resources, as Slurm says), and 1-GPU jobs that would run
    past it must not start."""
    busy = [running(job(f"r{i}", gpus=1, walltime_s=60.0 * (i + 1)), f"n0:{i}") for i in range(4)]
    pending = [
        job("big", gpus=8, walltime_s=60.0),
        job("small", gpus=1, walltime_s=600.0, submit_t_s=1),
    ]
    result = schedule(state(nodes(1), flat_queues({"a": 8}), pending, busy), 0.0)
    assert result.reservations["big"].t_s == 240.0
    assert result.pending_reasons == {"big": Reason.RESOURCES, "small": Reason.PRIORITY}
    short = replace(pending[1], walltime_s=120.0)  # ends before the reservation: backfills
    result = schedule(state(nodes(1), flat_queues({"a": 8}), [pending[0], short], busy), 0.0)
    assert [(x.job_id, x.reason) for x in result.starts] == [("small", StartReason.BACKFILL)]


def test_quota_reason_only_when_gpus_are_free():
    queues = flat_queues({"a": 8, "b": 8}, borrow={"a": 0})
    run = [running(job("a0", "a", gpus=8), "n0:0-7")]
    result = schedule(state(nodes(2), queues, [job("a1", "a", gpus=8)], run))
    assert result.pending_reasons == {"a1": Reason.QUOTA}
    assert result.reservations == {}  # a QOS-limited job holds no GPUs from other queues


# -- 8. priority preemption is opt-in ----------------------------------------------------------


@pytest.mark.parametrize(
    ("opt_in", "config", "preempted"),
    [
        (False, {}, False),  # Slurm's default: no priority preemption
        (True, {}, True),  # the queue opted in
        (False, {"priority_preemption_min": 1000}, True),  # a priority class opted in
        (False, {"priority_preemption_min": 5000}, False),
    ],
)
def test_priority_preemption_is_opt_in(opt_in, config, preempted):
    queues = flat_queues({"a": 8}, priority_preemption=opt_in)
    low = running(job("low", gpus=8, priority=0), "n0:0-7")
    result = schedule(
        state(nodes(1), queues, [job("high", gpus=8, priority=1000)], [low]), 10.0, **config
    )
    assert bool(result.preemptions) is preempted
    assert result.pending_reasons["high"] is (Reason.PREEMPTING if preempted else Reason.RESOURCES)


def test_backfilled_preemptible_job_yields_to_the_reservation_it_crossed():
    """`spot` crossed `big`'s reservation (it is preemptible); once `big` could start but for
    `spot`, it is asked to yield, whatever the queue's priority-preemption setting."""
    spot = replace(
        running(job("spot", gpus=4, preemptible=True, submit_t_s=5.0), "n0:4-7"),
        backfilled=True,
    )
    s = ClusterState(nodes(1), flat_queues({"a": 8}), [job("big", gpus=8)], [spot])
    result = schedule(s, 100.0)
    assert [(p.job_id, p.reason) for p in result.preemptions] == [
        ("spot", PreemptReason.RESERVATION)
    ]
    assert schedule(s, 100.0, preemption="off").preemptions == ()
