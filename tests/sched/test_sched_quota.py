"""Hierarchical quota: borrowing and lending limits, and reclaim of borrowed quota."""

from __future__ import annotations

from dataclasses import replace

import pytest
from lifecycle_driver import drive
from sched_fakes import H100, flat_queues, job, nodes, running, schedule, state

from railyard.sched import PreemptReason, Queue, Reason, SchedulerConfig
from railyard.sched.lifecycle import requeue_after_stop
from railyard.sched.quota import QuotaTree


def tree(*queues: Queue) -> QuotaTree:
    return QuotaTree(list(queues))


def q(name: str, parent: str | None = None, nominal: int = 0, **limits: int) -> Queue:
    return Queue(
        name,
        parent=parent,
        nominal_gpus={H100: nominal},
        borrowing_limit_gpus={H100: limits["borrow"]} if "borrow" in limits else {},
        lending_limit_gpus={H100: limits["lend"]} if "lend" in limits else {},
    )


@pytest.mark.parametrize(
    ("queues", "leaf", "available"),
    [
        ([q("org"), q("a", "org", 8), q("b", "org", 8)], "a", 16),
        ([q("org"), q("a", "org", 8, borrow=4), q("b", "org", 8)], "a", 12),
        ([q("org"), q("a", "org", 8), q("b", "org", 8, lend=2)], "a", 10),
        ([q("org"), q("a", "org", 8, lend=0), q("b", "org", 8)], "b", 8),
        ([q("org", nominal=4), q("a", "org", 8, borrow=0), q("b", "org", 8)], "a", 8),
        # teams: x = {p1: 8, p2: 0}, y = {p3: 8}; x may not borrow from y
        (
            [
                q("org"),
                q("x", "org", borrow=0),
                q("p1", "x", 8),
                q("p2", "x"),
                q("y", "org"),
                q("p3", "y", 8),
            ],
            "p2",
            8,
        ),
        (
            [
                q("org"),
                q("x", "org"),
                q("p1", "x", 8),
                q("p2", "x"),
                q("y", "org"),
                q("p3", "y", 8),
            ],
            "p2",
            16,
        ),
    ],
)
def test_available_quota(queues, leaf, available):
    assert tree(*queues).available(leaf, H100) == available


def test_usage_reduces_availability_up_the_tree():
    t = tree(q("org"), q("a", "org", 8, borrow=4), q("b", "org", 8))
    t.add("b", H100, 6)
    assert t.available("a", H100) == 10
    t.add("a", H100, 10)
    assert (t.available("a", H100), t.available("b", H100)) == (0, 0)
    t.remove("a", H100, 10)
    assert t.available("a", H100) == 10


def test_borrows_from_an_idle_sibling():
    pending = [job(f"a{i}", "a", gpus=8, submit_t_s=i) for i in range(5)]
    result = schedule(state(nodes(6), flat_queues({"a": 16, "b": 32}), pending))
    assert [(s.job_id, s.borrowing) for s in result.starts] == [
        ("a0", False),
        ("a1", False),
        ("a2", True),
        ("a3", True),
        ("a4", True),
    ]


def test_borrowing_limit_caps_the_loan():
    pending = [job(f"a{i}", "a", gpus=8, submit_t_s=i) for i in range(4)]
    result = schedule(state(nodes(4), flat_queues({"a": 16, "b": 16}, borrow={"a": 8}), pending))
    assert [s.job_id for s in result.starts] == ["a0", "a1", "a2"]
    assert result.pending_reasons == {"a3": Reason.QUOTA}


def borrowed_cluster(checkpoints: dict[str, float]) -> list:
    """Queue a runs four 8-GPU jobs on n0..n3: 16 GPUs are borrowed from b."""
    return [
        running(
            job(f"a{i}", "a", gpus=8),
            f"n{i}:0-7",
            start_t_s=0.0,
            last_checkpoint_t_s=checkpoints.get(f"a{i}"),
        )
        for i in range(4)
    ]


def test_lender_reclaims_its_nominal_quota_by_preempting_the_borrower():
    queues = flat_queues({"a": 16, "b": 16})
    run = borrowed_cluster({"a2": 90.0})  # a2 checkpointed recently: cheapest to stop
    s = state(nodes(4), queues, [job("b0", "b", gpus=8, submit_t_s=50)], run)
    result = schedule(s, now_t_s=100.0)
    assert [(p.job_id, p.reason, p.for_job_id) for p in result.preemptions] == [
        ("a2", PreemptReason.RECLAIM, "b0")
    ]
    assert result.pending_reasons == {"b0": Reason.PREEMPTING}

    # The driver signalled a2; the next cycle waits for it and preempts nobody else.
    signalled = [replace(r, preempt_for="b0") if r.id == "a2" else r for r in run]
    again = schedule(replace(s, running=tuple(signalled)), now_t_s=110.0)
    assert again.preemptions == ()
    assert again.pending_reasons == {"b0": Reason.PREEMPTING}

    # a2 stopped: b0 starts on its GPUs; a2 is requeued and now waits for quota.
    stopped = next(r for r in signalled if r.id == "a2")
    rest = [r for r in signalled if r.id != "a2"]
    after = schedule(
        replace(s, running=tuple(rest), pending=(s.pending[0], requeue_after_stop(stopped, 115.0))),
        now_t_s=120.0,
    )
    assert [(x.job_id, x.placement) for x in after.starts] == [("b0", {"n2": tuple(range(8))})]
    assert after.pending_reasons == {"a2": Reason.RESOURCES}  # every GPU is busy


def test_reclaim_takes_as_many_victims_as_needed_and_no_more():
    s = state(
        nodes(4),
        flat_queues({"a": 16, "b": 16}),
        [job("b0", "b", gpus=8, workers=2)],
        borrowed_cluster({"a0": 50.0, "a3": 60.0}),
    )
    result = schedule(s, now_t_s=100.0)
    assert sorted(p.job_id for p in result.preemptions) == ["a0", "a3"]


def test_no_reclaim_beyond_the_lenders_own_nominal():
    s = state(
        nodes(4),
        flat_queues({"a": 16, "b": 16}),
        [job("b0", "b", gpus=8, workers=3)],
        borrowed_cluster({}),
    )
    result = schedule(s, now_t_s=100.0)
    assert result.preemptions == ()
    assert result.pending_reasons == {"b0": Reason.RESOURCES}


def test_no_reclaim_when_preemption_is_off():
    s = state(
        nodes(4), flat_queues({"a": 16, "b": 16}), [job("b0", "b", gpus=8)], borrowed_cluster({})
    )
    result = schedule(s, now_t_s=100.0, preemption="off")
    assert result.preemptions == ()
    assert result.pending_reasons == {"b0": Reason.RESOURCES}


def test_a_lender_does_not_reclaim_a_set_whose_priority_job_would_evict_it_back():
    """Issue 56 item 5, a random draw of the over-committed property under unlimited
    admission: on 4 GPUs, p's priority job j4 (1 GPU, within p's nominal 1) evicts r's
    preemptible j1 (4 GPUs); p's j2 takes 2 of the freed GPUs (p borrows); r reclaims j2
    and j4 together, leaving p under its nominal, and j4 evicts j1 again: for ever. Each
    victim was asked alone whether it would evict j1 back, with the other still counted in
    p; the set is now asked as a whole, and j1 waits for p's jobs to end."""
    queues = [
        Queue("org"),
        Queue("r", "org", {H100: 7}, lending_limit_gpus={H100: 2}),
        Queue("p", "org", {H100: 1}, lending_limit_gpus={H100: 0}, priority_preemption=True),
    ]
    j1 = job("j1", "r", gpus=4, preemptible=True, walltime_s=50.0, submit_t_s=1.0)
    pending = [
        job("j2", "p", gpus=2, walltime_s=50.0, submit_t_s=2.0),
        job("j4", "p", gpus=1, priority=10, walltime_s=300.0, submit_t_s=4.0),
    ]
    s = state(nodes(1, gpus=4), queues, pending, [running(j1, "n0:0-3")])
    runtime = {"j1": 50.0, "j2": 50.0, "j4": 300.0}
    config = SchedulerConfig(admission="unlimited", preemption="on")
    run = drive(s, config, runtime_s=runtime, until_t_s=2_000.0, dt_s=10.0)
    evictions = [(victim, preemptor) for _, victim, preemptor in run.kinds("preempt")]
    assert evictions == [("j1", "j4")]  # once, by priority; never reclaimed back
    assert set(run.ended) == {"j1", "j2", "j4"}
    assert not run.running


def test_under_unlimited_admission_a_job_within_its_nominal_goes_before_a_borrower():
    """Issue 56 item 5, a random draw of the over-committed property under unlimited
    admission: on 4 GPUs, r's j1 (within r's nominal 1) reclaimed p's running j3 while p's
    j0 started borrowing beside it; when j0 ended, r's j2 started borrowing first and p's j3
    (within p's nominal 2) reclaimed j1: the two evicted each other. Reclaim holds nominal
    quotas under unlimited admission too, so borrowers now start after the jobs within
    their nominal, as under quota admission, and nobody is evicted."""
    queues = [Queue("org"), Queue("r", "org", {H100: 1}), Queue("p", "org", {H100: 2})]
    j3 = job("j3", "p", gpus=2, walltime_s=50.0, submit_t_s=3.0)
    pending = [
        job("j0", "p", gpus=2, walltime_s=50.0, submit_t_s=0.0),
        job("j1", "r", gpus=1, walltime_s=50.0, submit_t_s=1.0),
        job("j2", "r", gpus=2, walltime_s=50.0, submit_t_s=2.0),
    ]
    s = state(nodes(1, gpus=4), queues, pending, [running(j3, "n0:0-1")])
    config = SchedulerConfig(admission="unlimited", preemption="on")
    run = drive(s, config, runtime_s={j: 50.0 for j in ("j0", "j1", "j2", "j3")},
                until_t_s=2_000.0, dt_s=10.0)  # fmt: skip
    assert run.kinds("preempt") == []
    assert set(run.ended) == {"j0", "j1", "j2", "j3"}
    started = [e[2] for e in run.log if e[1] == "start"]
    assert started[0] == "j1"  # within r's nominal, though j0 was submitted first


def two_teams() -> list[Queue]:
    """Team ta (nominal 0) with r (1, priority preemption) under it; team tb (4) with p (0):
    5 GPUs of nominal for a 4-GPU node."""
    return [
        Queue("org"),
        Queue("ta", "org", {H100: 0}),
        Queue("tb", "org", {H100: 4}),
        Queue("r", "ta", {H100: 1}, priority_preemption=True),
        Queue("p", "tb", {H100: 0}),
    ]


def test_a_priority_job_does_not_evict_to_borrow_what_a_waiting_lender_takes_back():
    """Issue 56 item 5, a random draw of the over-committed property (team ta: 0 GPUs with
    r: 1 under it; team tb: 4 with p: 0; one 4-GPU node): r's j1 (4 GPUs, priority 10)
    evicted r's j0 (1 GPU) by priority and borrowed the other 3 from tb, whose p then
    reclaimed them for j2; j0 started again on r's nominal, and j1 evicted it again, once
    per p job (three times). The eviction gains nothing while a lender's job waits within
    its nominal: j1 now waits for p's jobs, and j0 is never evicted."""
    queues, j0 = two_teams(), job("j0", "r", gpus=1, walltime_s=50.0, submit_t_s=0.0)
    pending = [
        job("j1", "r", gpus=4, priority=10, walltime_s=50.0, submit_t_s=1.0),
        job("j2", "p", gpus=4, walltime_s=50.0, submit_t_s=2.0),
        job("j3", "p", gpus=4, walltime_s=50.0, submit_t_s=3.0),
    ]
    s = state(nodes(1, gpus=4), queues, pending, [running(j0, "n0:0")])
    run = drive(s, SchedulerConfig(preemption="on"), until_t_s=2_000.0, dt_s=10.0,
                runtime_s={j: 50.0 for j in ("j0", "j1", "j2", "j3")})  # fmt: skip
    assert [(victim, by) for _, victim, by in run.kinds("preempt")] == []
    assert set(run.ended) == {"j0", "j1", "j2", "j3"}
    assert not run.running


def test_a_priority_job_still_evicts_to_borrow_when_no_lender_waits():
    """The rule above asks about waiting jobs, not about the tree: with p's jobs gone, j1
    evicts j0 by priority and borrows tb's idle GPUs, as Kueue lets a job do in its queue."""
    queues, j0 = two_teams(), job("j0", "r", gpus=1, walltime_s=50.0, submit_t_s=0.0)
    j1 = job("j1", "r", gpus=4, priority=10, walltime_s=50.0, submit_t_s=1.0)
    result = schedule(state(nodes(1, gpus=4), queues, [j1], [running(j0, "n0:0")]), 10.0,
                      preemption="on")  # fmt: skip
    assert [(p.job_id, p.for_job_id, p.reason) for p in result.preemptions] == [
        ("j0", "j1", PreemptReason.PRIORITY)
    ]


@pytest.mark.parametrize(
    ("p1_priority", "p9_priority", "reclaimed"),
    [(2, 0, []), (2, 5, ["p1"]), (0, 0, ["p1"])],
    ids=["loan-held-below-p1", "p1-borrows", "p1-does-not-outrank"],
)
def test_reclaim_takes_a_higher_priority_job_only_where_it_borrows(
    p1_priority: int, p9_priority: int, reclaimed: list[str]
) -> None:
    """Issue 56 item 5, a draw of the driven property (quotas of 24 GPUs for 16): q1's p1
    (8 GPUs, within q1's nominal) had evicted q0's r0 by priority; q1's small p9 (2) then
    started beside it, so q1 borrowed 2, and r0 reclaimed the whole of p1 for them: the two
    evicted each other. A job that outranks the reclaimer is not taken beyond the loan where
    jobs of lower priority than it hold the loan; where it is the borrower (p9 ranks above
    it), or where it does not outrank the reclaimer, it is taken whole, as Kueue's
    `reclaimWithinCohort: Any` does."""
    queues = [Queue("org"), Queue("q0", "org", {H100: 16}), Queue("q1", "org", {H100: 8})]
    p1 = job("p1", "q1", gpus=4, workers=2, priority=p1_priority, preemptible=True)
    run = [
        running(p1, "n0:0-3 n1:0-3"),
        running(job("p9", "q1", gpus=2, priority=p9_priority), "n0:4-5"),  # q1 borrows 2
        running(job("x", "q0", gpus=2), "n0:6-7"),
        running(job("w", "q0", gpus=4, priority=5), "n1:4-7"),
    ]
    r0 = job("r0", "q0", gpus=4, preemptible=True, submit_t_s=10.0)
    result = schedule(state(nodes(2), queues, [r0], run), now_t_s=100.0, preemption="on")
    assert [(p.job_id, p.reason) for p in result.preemptions] == [
        (victim, PreemptReason.RECLAIM) for victim in reclaimed
    ]
    assert result.starts == ()
