"""Regression tests for the scheduler bugs of round 3 (issue 26), each built from its reported
scenario: a job that only down nodes could hold blocks nobody, a preemptor never takes what a
higher-ranked job's reservation counts on, and a queue bounds the protection a job claims."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from lifecycle_driver import drive
from sched_fakes import H100, flat_queues, job, nodes, running, schedule, state
from sched_fakes import drive as stream_drive

from railyard.sched import (
    Level,
    NodeState,
    Queue,
    Reason,
    SchedulerConfig,
    TopologyMode,
    TopologyRequirement,
)
from railyard.sched.limits import DEFAULT_MAX_MIN_RUNTIME_S, min_runtime_s

LG = TopologyRequirement(Level.LEAF_GROUP, TopologyMode.REQUIRED)
DAY_S = 24 * 3600.0


# -- 1. topology-infeasible on the nodes that are up: ReqNodeNotAvail, blocking nobody -----------


def starving_topology_case():
    """Three 4-GPU nodes; leaf group lg0 has n0 up and n1 down, lg1 has n2 up. T asks 2 x 4
    GPUs inside one leaf group: impossible while n1 is down, though 8 GPUs are up. B asks
    one GPU, which the idle cluster has."""
    inventory = nodes(3, gpus=4, per_lg=2, states={"n1": NodeState.DOWN})
    t = job("T", gpus=4, workers=2, topology=LG, submit_t_s=0.0, walltime_s=3600.0)
    b = job("B", gpus=1, submit_t_s=10.0, walltime_s=3600.0)
    return state(inventory, flat_queues({"a": 12}), [t, b])


@pytest.mark.parametrize("backfill", ["strict", "none", "easy", "conservative"])
@pytest.mark.parametrize("ordering", ["fifo", "priority", "fairshare"])
def test_a_job_only_down_nodes_could_hold_blocks_nobody(backfill, ordering):
    s = starving_topology_case()
    for now in (100.0, 6 * DAY_S, 8 * DAY_S):  # also past the 7-day starvation limit
        result = schedule(s, now, backfill=backfill, ordering=ordering)
        assert [x.job_id for x in result.starts] == ["B"], (now, result.pending_reasons)
        assert result.pending_reasons == {"T": Reason.REQ_NODE_NOT_AVAIL}


def test_at_the_defaults_it_blocks_nobody_before_or_after_the_starvation_limit():
    """Fair share + EASY with the 7-day starvation limit, the defaults: B starts on day 6 and
    on day 8, when T is starving (a starving job that cannot be reserved blocked its flavor)."""
    s = starving_topology_case()
    for now in (6 * DAY_S, 8 * DAY_S):
        result = schedule(s, now)
        assert [x.job_id for x in result.starts] == ["B"], now


# -- 2. over-committed quota trees converge ------------------------------------------------------


def test_two_branches_of_an_over_committed_tree_do_not_reclaim_from_each_other():
    """5 GPUs of nominal quota on one 4-GPU node: branch ta (0) has r (1), branch tb (4) has
    p (0). p's 4 GPUs come from its own branch's nominal, so r, one GPU short of its promise,
    borrows nothing of tb's back: before, r1 and r2 and p0 evicted each other for ever (p
    counted as borrowing because its own nominal is 0)."""
    queues = [
        Queue("org"),
        Queue("ta", "org", {H100: 0}),
        Queue("tb", "org", {H100: 4}),
        Queue("r", "ta", {H100: 1}),
        Queue("p", "tb", {H100: 0}),
    ]
    pending = [
        job("p0", "p", gpus=4, walltime_s=300.0, submit_t_s=0.0),
        job("r1", "r", gpus=1, walltime_s=50.0, submit_t_s=1.0),
        job("r2", "r", gpus=1, walltime_s=50.0, submit_t_s=2.0),
    ]
    s = state(nodes(1, gpus=4), queues, pending)
    for preemption in ("on", "reclaim", "las"):
        run = drive(s, SchedulerConfig(preemption=preemption), runtime_s={},
                    until_t_s=20_000.0)  # fmt: skip
        pairs = [(v, p) for _, v, p in run.kinds("preempt")]
        assert len(pairs) == len(set(pairs)) <= 2, (preemption, pairs)
        assert set(run.ended) == {"p0", "r1", "r2"}, preemption


def test_reclaim_takes_back_only_what_was_borrowed():
    """5 GPUs of nominal on a 4-GPU node: r (1, priority preemption) runs j0 and j1 (one GPU
    each: one of them borrowed); p (4) wants all 4 for j2. Reclaim may take back the one
    borrowed GPU, not r's own: j2 may not evict both. Before, it did, and r's j1 took its
    own GPU back from j2 by priority, for ever."""
    queues = [
        Queue("org"),
        Queue("r", "org", {H100: 1}, priority_preemption=True),
        Queue("p", "org", {H100: 4}),
    ]
    pending = [
        job("j0", "r", gpus=1, walltime_s=50.0, submit_t_s=0.0),
        job("j1", "r", gpus=1, priority=10, walltime_s=50.0, submit_t_s=1.0),
        job("j2", "p", gpus=4, preemptible=True, walltime_s=50.0, submit_t_s=2.0),
    ]
    run = drive(state(nodes(1, gpus=4), queues, pending), SchedulerConfig(), runtime_s={},
                until_t_s=2000.0)  # fmt: skip
    assert run.kinds("preempt") == []
    assert set(run.ended) == {"j0", "j1", "j2"}


def test_reclaim_counts_what_priority_victims_of_the_set_free():
    """12 GPUs of nominal on one 8-GPU node: q's jobs use all 8 (4 borrowed), one of them
    preemptible. g (p, 8 GPUs, priority 1) evicted that one by priority and reclaimed the
    rest, 6 GPUs for 4 borrowed, taking q below its nominal; q's h (priority 2) then
    evicted g by priority, q refilled, and g did it again, for ever (a random draw found it).
    Once the preemptible job is gone, q borrows 2: g waits for q's own jobs to end."""
    queues = [
        Queue("org"),
        Queue("q", "org", {H100: 4}, priority_preemption=True),
        Queue("p", "org", {H100: 8}, priority_preemption=True),
    ]
    run_ = [
        running(job("r0", "q", gpus=2, preemptible=True, walltime_s=200.0), "n0:0-1"),
        running(job("r1", "q", gpus=3, walltime_s=200.0), "n0:2-4"),
        running(job("r2", "q", gpus=3, walltime_s=200.0), "n0:5-7"),
    ]
    pending = [
        job("g", "p", gpus=8, priority=1, preemptible=True, walltime_s=200.0, submit_t_s=0.0),
        job("h", "q", gpus=3, priority=2, walltime_s=200.0, submit_t_s=1.0),
        job("i", "q", gpus=3, walltime_s=200.0, submit_t_s=2.0),
        job("k", "q", gpus=2, preemptible=True, walltime_s=200.0, submit_t_s=3.0),
    ]
    s = state(nodes(1, gpus=8), queues, pending, run_)
    for ordering in ("fifo", "priority"):
        config = SchedulerConfig.of(ordering=ordering, backfill="none", preemption="on")
        run = drive(s, config, runtime_s={}, until_t_s=20_000.0, dt_s=25.0)
        pairs = [(v, p) for _, v, p in run.kinds("preempt")]
        assert not {(p, v) for v, p in pairs} & set(pairs), (ordering, pairs)
        assert {"g", "h", "i", "k"} <= set(run.ended), ordering


def test_a_borrower_does_not_evict_its_lenders_backfilled_job():
    """Queue b (8 GPUs) runs j1 and lends to c; c's j0 (8 GPUs) reserves the node for j1's
    end, and b's preemptible j2 backfills across it. When j1 ends, j0 may not make j2 yield:
    j0 would borrow b's quota, and j2 would reclaim it at once (before: j0 evicted j2, then
    j2 evicted j0)."""
    queues = [Queue("org"), Queue("b", "org", {H100: 8}), Queue("c", "org", {H100: 0})]
    j1 = running(job("j1", "b", gpus=4, walltime_s=50.0), "n0:0-3")
    j0 = job("j0", "c", gpus=8, walltime_s=50.0, submit_t_s=0.0)
    j2 = job("j2", "b", gpus=4, preemptible=True, walltime_s=300.0, submit_t_s=2.0)
    run = drive(state(nodes(1), queues, [j0, j2], [j1]), SchedulerConfig(), runtime_s={},
                until_t_s=2000.0)  # fmt: skip
    assert run.kinds("preempt") == []
    assert run.ended == {"j1": "completed", "j2": "completed", "j0": "completed"}


# -- 3. a preemptor never takes what a higher-ranked job's reservation holds ----------------------


def test_a_lower_ranked_preemptor_leaves_the_heads_reservation_alone():
    """H (16 GPUs, priority 5) is the head: x (priority 10) keeps n1 and v (priority 0) holds
    n0 until t=100, so H reserves both nodes from t=100 (EASY). P (8 GPUs, priority 3,
    later) could evict v by priority, but v's node is the one H's reservation counts on: P
    waits, and H starts at t=100 instead of after P's 10,000 s."""
    queues = flat_queues({"a": 16}, priority_preemption=True)
    v = running(job("v", gpus=8, priority=0, walltime_s=100.0), "n0:0-7")
    x = running(job("x", gpus=8, priority=10, walltime_s=100.0), "n1:0-7")
    h = job("H", gpus=8, workers=2, priority=5, submit_t_s=1.0, walltime_s=1000.0)
    p = job("P", gpus=8, priority=3, submit_t_s=2.0, walltime_s=10_000.0)
    s = state(nodes(2), queues, [h, p], [v, x])
    result = schedule(s, 10.0, backfill="easy", ordering="priority")
    assert result.preemptions == ()
    assert list(result.reservations) == ["H"]
    run = drive(s, SchedulerConfig(backfill="easy", ordering="priority"), runtime_s={},
                until_t_s=20_000.0, start_t_s=10.0)  # fmt: skip
    starts = {j: t for t, j, _ in run.kinds("start")}
    assert starts["H"] == pytest.approx(100.0, abs=10.0)
    assert run.kinds("preempt") == []


def test_a_preemptor_may_still_evict_where_no_reservation_counts():
    """The same P, with no head ahead of it: it evicts v by priority, as before."""
    queues = flat_queues({"a": 16}, priority_preemption=True)
    v = running(job("v", gpus=8, priority=0, walltime_s=100.0), "n0:0-7")
    x = running(job("x", gpus=8, priority=10, walltime_s=100.0), "n1:0-7")
    p = job("P", gpus=8, priority=3, submit_t_s=2.0, walltime_s=10_000.0)
    result = schedule(state(nodes(2), queues, [p], [v, x]), 10.0, backfill="easy")
    assert [(q.job_id, q.for_job_id) for q in result.preemptions] == [("v", "P")]


# -- 4. bounds by default ------------------------------------------------------------------------


def test_min_runtime_is_bounded_by_default():
    """Ten years of protection from preemption is capped at the default bound of a queue
    whose admin set none; an admin's own bound still wins."""
    [_, q] = flat_queues({"a": 8})
    greedy = job("g", gpus=8, min_runtime_s=10 * 365 * DAY_S)
    assert DEFAULT_MAX_MIN_RUNTIME_S == 3600.0
    assert min_runtime_s(greedy, q) == DEFAULT_MAX_MIN_RUNTIME_S
    assert min_runtime_s(greedy, replace(q, max_min_runtime_s=7200.0)) == 7200.0
    assert min_runtime_s(replace(greedy, min_runtime_s=60.0), q) == 60.0


def light_user_behind_a_stream(hold_after_s):
    """Queue heavy keeps 40 one-GPU jobs waiting on 32 GPUs; at t=600 queue light, which has
    used nothing (fair share puts it first), asks for one whole node."""
    ids = itertools.count()

    def arrivals(t_s, pending, running_):
        new = [job("light", "light", gpus=8, walltime_s=100.0, submit_t_s=t_s)]
        new = new if t_s == 600.0 else []
        waiting = sum(1 for j in pending if j.queue == "heavy")
        stream = [job(f"h{next(ids)}", "heavy", gpus=1, walltime_s=50.0 + 10 * (next(ids) % 5),
                      submit_t_s=t_s) for _ in range(40 - waiting)]  # fmt: skip
        return new + stream

    config = SchedulerConfig(
        ordering="fairshare", backfill="none", admission="unlimited", preemption="off",
        greedy_hold_after_s=hold_after_s,
    )  # fmt: skip
    queues = flat_queues({"heavy": 0, "light": 0})
    return stream_drive(nodes(4), queues, arrivals, config, until_t_s=3 * 3600.0, dt_s=10.0,
                        half_life_s=3600.0)  # fmt: skip


def test_greedy_backfill_holds_for_a_job_that_waited_an_hour():
    """`fairshare-greedy` (fair share, backfill `none`) starved the light user's job until the
    7-day starvation limit: a gap never grew to a whole node. Greedy now holds GPUs for a job
    blocked `greedy_hold_after_s` (a day by default, an hour here), as EASY would for its
    head: it starts within that hour and one longest job of the stream."""
    held = light_user_behind_a_stream(3600.0)
    assert 600.0 + 3600.0 <= held.start_t_s["light"] <= 600.0 + 3600.0 + 90.0 + 10.0
    assert "light" not in light_user_behind_a_stream(None).start_t_s  # the old behaviour


# -- 6. speed: what a pass derives once must equal what it derived each time ---------------------


def test_release_events_from_a_kept_base_equal_those_derived_from_every_blocker():
    """A pass keeps the running jobs' GPU release events (`base_events`) and lays the few
    blockers of the pass on top; the result must be the events of all of them together,
    also where two blockers share a GPU (the later end frees it)."""
    import random

    from railyard.sched.reserve import Blocker, base_events, release_events
    from railyard.sched.snapshot import Snapshot, Topology

    rng = random.Random(5)
    inventory = nodes(6)
    flavor = inventory[0].flavor
    seen = 0
    for _ in range(200):

        def blocker():
            masks = {i: rng.randrange(1, 256) for i in rng.sample(range(6), rng.randint(1, 3))}
            return Blocker(float(rng.choice([10, 20, 30, 40, float("inf")])), masks)

        running = [blocker() for _ in range(rng.randint(0, 12))]
        extra = [blocker() for _ in range(rng.randint(0, 3))]
        snap = Snapshot(Topology(inventory))  # every blocker's GPUs are busy
        busy: dict[int, int] = {}
        for b in running + extra:
            for i, m in b.masks.items():
                busy[i] = busy.get(i, 0) | m
        snap.take(busy)
        layered = list(release_events(snap, flavor, base_events(snap, flavor, running), extra))
        whole = list(release_events(snap, flavor, base_events(snap, flavor, running + extra)))
        assert layered == whole
        seen += bool(whole)
    assert seen  # events were compared, not only empty streams


def test_quota_knows_when_nobody_borrows():
    queues = flat_queues({"a": 8, "b": 8})
    from railyard.sched.quota import QuotaTree

    tree = QuotaTree(queues, [H100])
    tree.add("a", H100, 8)
    assert not tree.borrowing(H100)
    tree.add("a", H100, 4)  # a runs on 4 of b's
    assert tree.borrowing(H100)
    tree.remove("a", H100, 4)
    assert not tree.borrowing(H100)


# -- 4. time slicing takes turns, a quantum apart, even after a reservation's eviction ----------


def test_a_reservation_eviction_then_a_time_slice_back_waits_a_quantum() -> None:
    """A random draw of the liveness property (fifo, EASY, `las` with a 50 s quantum): p7,
    ahead in fifo, evicts the backfilled p2 (Reservation); requeued, p2 is ahead of the
    backfilled p5 and evicts it (Reservation); once p2 has run more than a quantum, p5, with
    less service, takes the GPUs back (TimeSlice). Taking turns is what time slicing is for;
    what must hold is that nobody is sliced out before a quantum, and that everyone ends."""
    inventory = nodes(3, per_lg=1, domains=(tuple(range(8)),))
    queues = flat_queues({"q0": 0, "q1": 32}, priority_preemption=True)
    q0 = dict(queue="q0", user="u1", walltime_s=200.0)
    pending = [
        job("p0", gpus=2, **q0), job("p1", gpus=4, **q0),
        job("p2", gpus=4, preemptible=True, submit_t_s=1.0, **q0),
        job("p3", gpus=8, workers=2, **q0), job("p4", **q0),
        job("p5", gpus=4, preemptible=True, submit_t_s=1.0, **q0),
        job("p6", gpus=2, workers=2, **q0), job("p7", workers=3, **q0),
    ]  # fmt: skip
    busy = [running(job("r0", gpus=8, **{**q0, "walltime_s": 10.0}), "n1:0-7")]
    busy += [running(job(f"r{k}", **q0), f"n0:{k - 2}") for k in (2, 3, 4)]
    config = SchedulerConfig(ordering="fifo", backfill="easy", preemption="las",
                             starvation_limit_s=300.0, time_slice_quantum_s=50.0,
                             service_levels_gpu_s=(500.0, 5000.0))  # fmt: skip
    s = state(inventory, queues, pending, busy)
    runtime = {j.id: 200.0 for j in pending} | {"r0": 10.0, "r2": 200.0, "r3": 200.0, "r4": 200.0}
    run = drive(s, config, runtime_s=runtime, until_t_s=60_000.0, dt_s=25.0)
    evictions = [(t, v, p, run.preempt_reasons[(t, v)]) for t, v, p in run.kinds("preempt")]
    assert evictions == [
        (50.0, "p2", "p7", "Reservation"),
        (75.0, "p5", "p2", "Reservation"),
        (175.0, "p2", "p5", "TimeSlice"),
    ]
    assert (100.0, "start", "p2", "n1") in run.log  # sliced out 75 s later, over the quantum
    assert set(run.ended) >= {j.id for j in pending}
