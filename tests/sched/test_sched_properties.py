"""Property tests: invariants every cycle must keep, on random small clusters."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from lifecycle_driver import Run, drive, fits_empty_cluster
from sched_fakes import H100, job, nodes
from tests.tiers import examples

from railyard.sched import (
    ClusterState,
    Level,
    NodeState,
    Queue,
    RunningJob,
    SchedulerConfig,
    TopologyMode,
    TopologyRequirement,
    cycle,
    estimate_start_t_s,
)
from railyard.sched.snapshot import bits, lowest_bits

NOW = 200.0
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
READY_MOSTLY = [NodeState.READY] * 5 + [NodeState.DRAINING, NodeState.DRAINED, NodeState.DOWN]
TOPOLOGIES = [
    None,
    None,
    TopologyRequirement(Level.LEAF_GROUP, TopologyMode.REQUIRED),
    TopologyRequirement(Level.SCALABLE_UNIT, TopologyMode.PREFERRED),
]


@st.composite
def jobs(draw, queue_names, id_prefix, count):
    out = []
    for k in range(count):
        out.append(
            job(
                f"{id_prefix}{k}",
                draw(st.sampled_from(queue_names)),
                gpus=draw(st.sampled_from([1, 2, 4, 8])),
                workers=draw(st.sampled_from([1, 1, 1, 2, 3])),
                user=draw(st.sampled_from(["u1", "u2"])),
                priority=draw(st.integers(0, 2)),
                preemptible=draw(st.booleans()),
                walltime_s=draw(st.one_of(st.none(), st.floats(10.0, 500.0))),
                topology=draw(st.sampled_from(TOPOLOGIES)),
                submit_t_s=draw(st.floats(0.0, NOW)),
                min_runtime_s=draw(st.sampled_from([0.0, 0.0, 150.0])),
                checkpoint_grace_s=draw(st.sampled_from([0.0, 30.0])),
            )
        )
    return out


def limited_queues(draw, names):
    """Leaf queues under `org`, or (nested) under two teams that may have borrowing limits."""
    nested = draw(st.booleans())
    out = [Queue("org")]
    if nested:
        for team in ("ta", "tb"):
            limit = draw(st.one_of(st.none(), st.integers(0, 16)))
            out.append(Queue(team, parent="org", borrowing_limit_gpus=_limit(limit)))
    for i, name in enumerate(names):
        out.append(
            Queue(
                name,
                parent=("ta" if i < 2 else "tb") if nested else "org",
                nominal_gpus={H100: draw(st.sampled_from([0, 8, 16, 32]))},
                borrowing_limit_gpus=_limit(draw(st.one_of(st.none(), st.integers(0, 16)))),
                lending_limit_gpus=_limit(draw(st.one_of(st.none(), st.integers(0, 16)))),
            )
        )
    return out


def _limit(gpus):
    return {} if gpus is None else {H100: gpus}


def subtree_totals(queues, jobs):
    """GPUs used by `jobs` in each queue's subtree, and each subtree's nominal quota."""
    parent = {q.name: q.parent for q in queues}

    def path(name):
        while name is not None:
            yield name
            name = parent[name]

    used, nominal = {}, {}
    for q in queues:
        for a in path(q.name):
            nominal[a] = nominal.get(a, 0) + q.nominal_gpus.get(H100, 0)
    for j in jobs:
        for a in path(j.queue):
            used[a] = used.get(a, 0) + j.gpus
    return used, nominal, path


def within_limits(queues, jobs):
    used, nominal, _ = subtree_totals(queues, jobs)
    limits = {q.name: q.borrowing_limit_gpus.get(H100) for q in queues}
    return (
        all(
            used.get(q, 0) <= nominal[q] + (limits[q] if limits[q] is not None else 10**9)
            for q in limits
        )
        and used.get("org", 0) <= nominal["org"]
    )


@st.composite
def cluster_states(draw):
    count = draw(st.integers(1, 6))
    gpus = draw(st.sampled_from([4, 8]))
    states = {f"n{i}": draw(st.sampled_from(READY_MOSTLY)) for i in range(count)}
    inventory = nodes(count, gpus=gpus, per_lg=draw(st.integers(1, 3)), states=states)
    names = [f"q{i}" for i in range(draw(st.integers(1, 3)))]
    queues = limited_queues(draw, names)
    # running jobs: carve random free GPUs out of random nodes, within every quota limit
    free = {n.name: (1 << n.gpus) - 1 for n in inventory}
    running = []
    for r in draw(jobs(names, "r", draw(st.integers(0, 6)))):
        node = draw(st.sampled_from(sorted(free)))
        take = lowest_bits(free[node], r.gpus)
        one = replace(r, workers=1, gpus_per_worker=r.gpus)
        if take.bit_count() < r.gpus or not within_limits(queues, [*running_jobs(running), one]):
            continue
        free[node] &= ~take
        ckpt = draw(st.one_of(st.none(), st.floats(0.0, NOW)))
        running.append(RunningJob(one, {node: bits(take)}, draw(st.floats(0.0, NOW)), ckpt))
    pending = draw(jobs(names, "p", draw(st.integers(1, 10))))
    return ClusterState(inventory, queues, pending, running)


def running_jobs(running):
    return [r.job for r in running]


CONFIGS = st.builds(
    SchedulerConfig,
    ordering=st.sampled_from(["fifo", "priority", "fairshare"]),
    placement=st.sampled_from(["fabric-aware", "first-fit"]),
    backfill=st.sampled_from(["none", "easy", "conservative"]),
    preemption=st.sampled_from(["off", "reclaim", "on"]),
    starvation_limit_s=st.sampled_from([100.0, 1e9]),
    exact_victim_search_max=st.sampled_from([0, 10]),
)


@examples(25, 200, SETTINGS)
@given(cluster_states(), CONFIGS)
def test_cycle_invariants(s, config):
    result = cycle(s, NOW, config)
    event(f"starts>0: {bool(result.starts)}, preempts>0: {bool(result.preemptions)}")
    event(f"reservations>0: {bool(result.reservations)}")
    pending = {j.id: j for j in s.pending}
    started = [x.job_id for x in result.starts]
    # every pending job either starts or has exactly one reason
    assert set(started) | set(result.pending_reasons) == set(pending)
    assert not set(started) & set(result.pending_reasons)
    # no GPU double-booked; only READY nodes; whole gang with each worker on one node
    ready = {n.name for n in s.nodes if n.state is NodeState.READY}
    taken = {(n, g) for r in s.running for n, gs in r.placement.items() for g in gs}
    for x in result.starts:
        j = pending[x.job_id]
        assert set(x.placement) <= ready
        assert sum(len(g) for g in x.placement.values()) == j.gpus
        assert all(len(g) % j.gpus_per_worker == 0 for g in x.placement.values())
        mine = {(n, g) for n, gs in x.placement.items() for g in gs}
        assert not mine & taken
        taken |= mine
    # quota: a queue (leaf or team) that started work stays within nominal + borrowing
    # limit of its subtree; the cohort within the sum of nominal quotas
    if config.admission == "quota" and result.starts:
        jobs_after = [*running_jobs(s.running), *(pending[i] for i in started)]
        used, nominal, path = subtree_totals(s.queues, jobs_after)
        limits = {q.name: q.borrowing_limit_gpus.get(H100) for q in s.queues}
        touched = {a for i in started for a in path(pending[i].queue)}
        for q in touched:
            if limits[q] is not None:
                assert used[q] <= nominal[q] + limits[q]
        assert used["org"] <= nominal["org"]
    # preemption: running, unsignalled victims past their min runtime, each signalled once
    running = {r.id: r for r in s.running}
    victims = [p.job_id for p in result.preemptions]
    assert len(victims) == len(set(victims))
    for v in victims:
        r = running[v]
        assert r.preempt_for is None
        assert NOW - r.start_t_s >= r.job.min_runtime_s
    if config.preemption == "off":
        assert victims == []


@examples(25, 200, SETTINGS)
@given(cluster_states(), CONFIGS, st.randoms(use_true_random=False))
def test_cycle_is_deterministic(s, config, rng):
    first = cycle(s, NOW, config)
    assert cycle(s, NOW, config) == first
    shuffled = [list(x) for x in (s.nodes, s.queues, s.pending, s.running)]
    for x in shuffled:
        rng.shuffle(x)
    assert cycle(ClusterState(*shuffled, usage=s.usage), NOW, config) == first


def assert_backfill_keeps_reservations(s: ClusterState, backfill: str) -> None:
    """Start what one cycle starts; every reserved job can still start by its reservation."""
    config = SchedulerConfig(backfill=backfill, preemption="off")
    result = cycle(s, NOW, config)
    pending = {j.id: j for j in s.pending}
    started = [RunningJob(pending[x.job_id], x.placement, NOW) for x in result.starts]
    after = replace(s, running=(*s.running, *started))
    for job_id, reservation in result.reservations.items():
        t_s = estimate_start_t_s(after, pending[job_id], NOW, config)
        assert t_s is not None
        assert t_s <= reservation.t_s


@examples(25, 200, SETTINGS)
@given(cluster_states(), st.sampled_from(["easy", "conservative"]))
def test_backfill_never_delays_a_reservation(s, backfill):
    assert_backfill_keeps_reservations(s, backfill)


LIVENESS_CONFIGS = st.builds(
    SchedulerConfig,
    ordering=st.sampled_from(["fifo", "priority", "fairshare", "las"]),
    backfill=st.sampled_from(["strict", "none", "easy", "conservative"]),
    preemption=st.sampled_from(["off", "reclaim", "on", "las"]),
    starvation_limit_s=st.sampled_from([300.0, 1e9]),
    time_slice_quantum_s=st.sampled_from([50.0, 600.0]),
    service_levels_gpu_s=st.just((500.0, 5000.0)),
    preemption_searches_per_queue=st.sampled_from([1, 16]),  # 16: time slicing's default
    time_slice_by=st.sampled_from(["attained", "remaining"]),  # remaining: las's default
    starved_unsliced_s=st.sampled_from([0.0, None]),  # None: las's default
)


def _finite(s: ClusterState) -> ClusterState:
    """Every job gets a run time, so that a cluster left alone drains."""
    jobs_ = [replace(j, walltime_s=j.walltime_s or 200.0) for j in s.pending]
    running = [
        replace(r, job=replace(r.job, walltime_s=r.job.walltime_s or 200.0)) for r in s.running
    ]
    queues = [replace(q, priority_preemption=q.parent is not None) for q in s.queues]
    return replace(s, pending=tuple(jobs_), running=tuple(running), queues=tuple(queues))


# Random draws: the starved job they once found (a gang only down nodes could hold, waiting
# `Topology` and blocking its flavor) now waits `ReqNodeNotAvail` and blocks nobody (issue 26;
# tests/sched/test_sched_round3.py keeps that case).
@examples(12, 300, SETTINGS)
@given(cluster_states(), LIVENESS_CONFIGS)
def test_driven_to_the_end_no_livelock_no_starvation(s, config):
    """Cycles driven until the cluster drains: no ping-pong (`assert_no_ping_pong`), and
    every job that fits the empty cluster and its quota ends."""
    s = _finite(s)
    runtime = {j.id: j.walltime_s for j in s.pending} | {r.id: r.job.walltime_s for r in s.running}
    run = drive(s, config, runtime_s=runtime, until_t_s=60_000.0, dt_s=25.0)
    evictions = run.kinds("preempt")
    slices = [e for e in evictions if run.preempt_reasons.get(e[:2]) == "TimeSlice"]
    pairs = [(victim, preemptor) for _, victim, preemptor in evictions]
    assert_no_ping_pong([(v, p) for t, v, p in evictions if (t, v, p) not in slices])
    first = {r.id: r.start_t_s for r in s.running}
    assert_slices_wait_a_quantum(run, slices, config.time_slice_quantum_s, first)
    event(f"preemptions: {min(len(pairs), 3)}")
    for j in s.pending:
        if fits_empty_cluster(s, j, config):
            assert j.id in run.ended, (j.id, [e for e in run.log if e[2] == j.id][-5:])


@st.composite
def tenancy_states(draw):
    """Two queues sharing one or two 8-GPU nodes, lenders and borrowers, mixed priorities:
    the small states where preemption rules meet (the ping-pong of round 2 lives here)."""
    inventory = nodes(draw(st.integers(1, 2)))
    queues = [Queue("org")] + [
        Queue(
            name,
            "org",
            {H100: draw(st.sampled_from([0, 8]))},
            priority_preemption=draw(st.booleans()),
        )
        for name in ("b", "c")
    ]
    free = {n.name: 0xFF for n in inventory}
    running, pending = [], []
    for k in range(draw(st.integers(1, 5))):
        j = job(
            f"j{k}",
            draw(st.sampled_from(["b", "c"])),
            gpus=draw(st.sampled_from([4, 8])),
            priority=draw(st.sampled_from([0, 10])),
            preemptible=draw(st.booleans()),
            walltime_s=draw(st.sampled_from([50.0, 300.0])),
            submit_t_s=float(k),
        )
        node = draw(st.sampled_from(sorted(free)))
        take = lowest_bits(free[node], j.gpus)
        if draw(st.booleans()) and take.bit_count() == j.gpus:
            free[node] &= ~take
            running.append(RunningJob(j, {node: bits(take)}, 0.0))
        else:
            pending.append(j)
    return ClusterState(inventory, queues, pending, running)


def assert_slices_wait_a_quantum(run, slices, quantum_s, first_start_t_s):
    """Time slicing hands GPUs back and forth by design (two jobs of one service level take
    turns, whatever evicted the first: a reservation, say), but never sooner than a quantum:
    each time-slice victim ran at least that long since it last started (or since its start
    in `first_start_t_s`, for a job running when the drive began)."""
    starts = run.kinds("start")
    for t, victim, _ in slices:
        restarts = [s for s, j, _ in starts if j == victim and s <= t]
        started = max(restarts) if restarts else first_start_t_s[victim]
        assert t - started >= quantum_s, (victim, started, t)


def assert_no_ping_pong(pairs):
    """No two jobs evict each other, and no job evicts the same job more than twice. Twice
    is a chain, not a ping-pong: on one 8-GPU node b lends all 8 to c; c's j2 (8 GPUs,
    priority 10) evicts c's j1 (4, preemptible), b's j0 (4) reclaims from j2, j1 backfills
    beside j0, and once j0 ends j2 evicts j1 again (random draws find it 1 in a few thousand)."""
    assert not {(p, v) for v, p in pairs} & set(pairs), pairs
    assert all(pairs.count(pair) <= 2 for pair in pairs), pairs


def assert_no_reversal_while_nothing_else_ends(run):
    """Over-committed trees: two jobs evict each other only if a third job ended in between
    (the quotas changed under them), each reversal once, and no job evicts the same job more
    than twice. A drawn tree (2026-12-06): teams ta (r, nominal 1) and tb (p 2, s 1) on a
    4-GPU node; r's j0 reclaims from s's j3 while p's j1 holds 2 (tb over its 3); j1 ends,
    r's newcomer starts on tb's idle quota, and j3 reclaims it back, taking j0 among r's jobs
    that started together (Kueue takes the most recently admitted, a tie here). The cluster
    then drains; what never changes by itself, the same two taking turns, stays refused."""
    evictions = run.kinds("preempt")
    ends = run.kinds("end")
    for t1, victim, preemptor in evictions:
        back = [t2 for t2, v, p in evictions if (v, p) == (preemptor, victim) and t2 > t1]
        for t2 in back:
            moved = [j for t, j, _ in ends if t1 < t <= t2 and j not in (victim, preemptor)]
            assert moved, (t1, victim, preemptor, t2, run.log)
        assert len(back) <= 1, (victim, preemptor, back)
    pairs = [(v, p) for _, v, p in evictions]
    assert all(pairs.count(pair) <= 2 for pair in pairs), pairs


@examples(40, 1500, SETTINGS)
@given(tenancy_states(), st.sampled_from(["on", "las"]))
def test_lenders_borrowers_and_priorities_reach_a_fixed_point(s, preemption):
    config = SchedulerConfig.of(preemption=preemption, time_slice_quantum_s=0.0)
    runtime = {j.id: j.walltime_s for j in s.pending} | {r.id: r.job.walltime_s for r in s.running}
    run = drive(s, config, runtime_s=runtime, until_t_s=20_000.0, dt_s=10.0)
    assert_no_ping_pong([(victim, preemptor) for _, victim, preemptor in run.kinds("preempt")])
    assert not run.running, run.log[-6:]
    for j in s.pending:
        if fits_empty_cluster(s, j, config):
            assert j.id in run.ended, [e for e in run.log if e[2] == j.id][-6:]


@st.composite
def over_committed_states(draw):
    """One 4-GPU node under quota trees whose nominal quotas may add up to more than it
    (up to 7 per queue, nested teams with their own nominal, lending limits): the trees in
    which two branches once reclaimed from each other for ever."""
    queues = [Queue("org")]
    names = ["r", "p", "s"][: draw(st.integers(2, 3))]
    nested = draw(st.booleans())
    if nested:
        queues += [Queue(t, "org", {H100: draw(st.integers(0, 6))}) for t in ("ta", "tb")]
    for i, name in enumerate(names):
        lend = draw(st.one_of(st.none(), st.integers(0, 4)))
        queues.append(
            Queue(
                name,
                ("ta" if i == 0 else "tb") if nested else "org",
                {H100: draw(st.integers(0, 7))},
                lending_limit_gpus=_limit(lend),
                priority_preemption=draw(st.booleans()),
            )
        )
    free = 0xF
    running, pending = [], []
    for k in range(draw(st.integers(1, 5))):
        j = job(
            f"j{k}",
            draw(st.sampled_from(names)),
            gpus=draw(st.sampled_from([1, 2, 4])),
            priority=draw(st.sampled_from([0, 10])),
            preemptible=draw(st.booleans()),
            walltime_s=draw(st.sampled_from([50.0, 300.0])),
            submit_t_s=float(k),
        )
        take = lowest_bits(free, j.gpus)
        if draw(st.booleans()) and take.bit_count() == j.gpus:
            free &= ~take
            running.append(RunningJob(j, {"n0": bits(take)}, 0.0))
        else:
            pending.append(j)
    return ClusterState(nodes(1, gpus=4), queues, pending, running)


@examples(50, 2000, SETTINGS)
@given(
    over_committed_states(),
    st.sampled_from(["on", "reclaim", "las"]),
    st.sampled_from(["quota", "unlimited"]),
)
def test_over_committed_trees_reach_a_fixed_point(s, preemption, admission):
    """No two jobs take turns evicting each other while nothing else ends (a third job's end
    changes the quotas: `assert_no_reversal_while_nothing_else_ends`), and the cluster
    drains; also under unlimited
    admission, where a queue's jobs borrow whatever is free and reclaim alone holds quotas
    (issue 56 item 5: 7 livelocks in 20,000 driven states; `test_sched_quota.py` keeps one)."""
    config = SchedulerConfig.of(preemption=preemption, admission=admission)
    runtime = {j.id: j.walltime_s for j in s.pending} | {r.id: r.job.walltime_s for r in s.running}
    run = drive(s, config, runtime_s=runtime, until_t_s=20_000.0, dt_s=10.0)
    assert_no_reversal_while_nothing_else_ends(run)
    assert not run.running, run.log[-6:]


def test_a_reversal_is_a_ping_pong_unless_a_third_job_ended_in_between() -> None:
    """The over-committed property's check itself: j0 and j2 evicting each other with nothing
    else ended fails it, as does a second reversal; with j1's end between them it holds."""
    turns = [(0.0, "preempt", "j2", "j0"), (50.0, "preempt", "j0", "j2")]
    with pytest.raises(AssertionError):
        assert_no_reversal_while_nothing_else_ends(Run(log=list(turns)))
    changed = Run(log=[turns[0], (50.0, "end", "j1", "completed"), turns[1]])
    assert_no_reversal_while_nothing_else_ends(changed)
    again = [*changed.log, (90.0, "end", "j5", "completed"), (100.0, "preempt", "j0", "j2")]
    with pytest.raises(AssertionError):  # j2 evicts j0 twice after j0 evicted it
        assert_no_reversal_while_nothing_else_ends(Run(log=again))
