"""Preemption: cheapest sufficient victim set, min runtime, spot first, no double signals."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sched_fakes import flat_queues, job, nodes, placement, running, schedule, state

from railyard.sched import PreemptReason, Reason

Q = flat_queues({"a": 64, "b": 64}, priority_preemption=True)
NOW = 100.0


def low(id: str, where: str, ckpt: float = 0.0, queue: str = "a", preempt_for=None, **kw):
    """A priority-0 job on `where` that last checkpointed at `ckpt` (started at 0)."""
    gpus = sum(len(g) for g in placement(where).values())
    return running(
        job(id, queue, gpus=gpus, **kw),
        where,
        0.0,
        last_checkpoint_t_s=ckpt,
        preempt_for=preempt_for,
    )


HIGH = job("hi", "a", gpus=4, priority=10)


@pytest.mark.parametrize("exact_max", [10, 0])
@pytest.mark.parametrize(
    ("victims", "expected"),
    [
        # {r2, r3} lose 2x10 + 2x10 GPU-s; {r1} would lose 4x100
        ([low("r1", "n0:0-3"), low("r2", "n0:4-5", 90), low("r3", "n0:6-7", 90)], {"r2", "r3"}),
        # now {r1} is cheapest: 4x5 against 2x50 + 2x50
        ([low("r1", "n0:0-3", 95), low("r2", "n0:4-5", 50), low("r3", "n0:6-7", 50)], {"r1"}),
        # equal lost work: fewer victims win
        ([low("r1", "n0:0-3", 50), low("r2", "n0:4-5", 0), low("r3", "n0:6-7", 0)], {"r1"}),
        # spot first, even when it loses more work
        ([low("r1", "n0:0-3", 99), low("r2", "n0:4-7", 0, preemptible=True)], {"r2"}),
        # min runtime protects r1; r2 + r3 must go although dearer
        (
            [low("r1", "n0:0-3", 99, min_runtime_s=500), low("r2", "n0:4-5"), low("r3", "n0:6-7")],
            {"r2", "r3"},
        ),
    ],
)
def test_cheapest_sufficient_victims(victims, expected, exact_max):
    result = schedule(state(nodes(1), Q, [HIGH], victims), NOW, exact_victim_search_max=exact_max)
    assert {p.job_id for p in result.preemptions} == expected
    assert all(
        p.reason is PreemptReason.PRIORITY and p.for_job_id == "hi" for p in result.preemptions
    )
    assert result.pending_reasons == {"hi": Reason.PREEMPTING}


def test_grace_comes_from_the_victim():
    victims = [low("r1", "n0:0-7", checkpoint_grace_s=42.0)]
    result = schedule(state(nodes(1), Q, [HIGH], victims), NOW)
    assert [(p.job_id, p.grace_s) for p in result.preemptions] == [("r1", 42.0)]


def test_victims_must_actually_make_room():
    # r-cheap shares n0 with a high-priority job, so evicting it cannot free a whole node.
    run = [
        low("r-cheap", "n0:0-3", 99),
        running(job("keep", "a", gpus=4, priority=50), "n0:4-7"),
        low("r-dear", "n1:0-7", 0),
    ]
    gang = job("hi", "a", gpus=8, workers=2, priority=10)
    result = schedule(state(nodes(3), Q, [gang], run), NOW)
    assert [p.job_id for p in result.preemptions] == ["r-dear"]


@pytest.mark.parametrize(
    ("victim", "preempted"),
    [
        (low("same-prio", "n0:0-7", priority=10), False),  # not lower priority
        (low("other-q", "n0:0-7", queue="b"), False),  # b within its nominal, not spot
        (low("other-q-spot", "n0:0-7", queue="b", preemptible=True), True),
        (low("young", "n0:0-7", min_runtime_s=NOW + 1), False),
    ],
)
def test_who_may_be_preempted(victim, preempted):
    result = schedule(state(nodes(1), Q, [HIGH], [victim]), NOW)
    assert bool(result.preemptions) is preempted
    assert result.pending_reasons["hi"] is (Reason.PREEMPTING if preempted else Reason.RESOURCES)


def test_a_signalled_victim_is_not_signalled_again():
    victims = [low("r1", "n0:0-3", preempt_for="other"), low("r2", "n0:4-7")]
    result = schedule(state(nodes(1), Q, [HIGH], victims), NOW)
    assert [p.job_id for p in result.preemptions] == ["r2"]


def test_two_preemptors_in_one_cycle_pick_disjoint_victims():
    victims = [low("r1", "n0:0-3"), low("r2", "n0:4-7")]
    pending = [HIGH, replace(HIGH, id="hi2", submit_t_s=1.0)]
    result = schedule(state(nodes(1), Q, pending, victims), NOW, preemption_searches_per_queue=2)
    assert sorted(p.job_id for p in result.preemptions) == ["r1", "r2"]
    assert len({p.for_job_id for p in result.preemptions}) == 2


def test_one_victim_search_per_queue_and_cycle_by_default():
    victims = [low("r1", "n0:0-3"), low("r2", "n0:4-7")]
    pending = [HIGH, replace(HIGH, id="hi2", submit_t_s=1.0)]
    result = schedule(state(nodes(1), Q, pending, victims), NOW)
    assert [p.for_job_id for p in result.preemptions] == ["hi"]
    assert result.pending_reasons == {"hi": Reason.PREEMPTING, "hi2": Reason.PRIORITY}


def test_preemptor_waits_for_its_own_victims_without_new_signals():
    victims = [low("r1", "n0:0-3", preempt_for="hi"), low("r2", "n0:4-7")]
    result = schedule(state(nodes(1), Q, [HIGH], victims), NOW)
    assert result.preemptions == ()
    assert result.pending_reasons == {"hi": Reason.PREEMPTING}
