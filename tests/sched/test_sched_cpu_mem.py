"""CPU cores and memory are requests the scheduler accounts per node, beside GPUs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lifecycle_driver import drive, fits_empty_cluster
from sched_fakes import flat_queues, job, nodes, running, schedule, state
from test_sched_properties import (
    CONFIGS,
    LIVENESS_CONFIGS,
    NOW,
    SETTINGS,
    _finite,
    assert_backfill_keeps_reservations,
    cluster_states,
)
from tests.tiers import examples

from railyard.sched import (
    ClusterState,
    CycleCache,
    Job,
    Node,
    PreemptReason,
    Reason,
    RunningJob,
    StartReason,
    cycle,
    estimate_start_t_s,
)
from railyard.sched.feasible import never_placeable
from railyard.sched.policies import PLACEMENT

Q = flat_queues({"a": 64, "b": 64})


def sized(count: int, cores: int = 0, mem_gb: float = 0.0, **kw: object) -> list[Node]:
    """`count` 8-GPU nodes that declare `cores` and `mem_gb` (0: declare nothing)."""
    return [replace(n, cpu_cores=cores, mem_gb=mem_gb) for n in nodes(count, **kw)]  # type: ignore[arg-type]


def run_cycles(inventory: list[Node], pending: list[Job], ends: dict[str, float], **cfg: object):
    """Cycle at t = 0, 10, 20...: start what the cycle starts, end jobs at `ends`; returns the
    start times and the reasons seen for each job while it waited."""
    run: list[RunningJob] = []
    starts: dict[str, float] = {}
    reasons: dict[str, set[Reason]] = {}
    for step in range(10):
        t_s = step * 10.0
        run = [r for r in run if ends.get(r.id, 1e9) > t_s]
        result = schedule(state(inventory, Q, pending, run), t_s, **cfg)
        by_id = {j.id: j for j in pending}
        for s in result.starts:
            run.append(RunningJob(by_id[s.job_id], s.placement, t_s))
            starts[s.job_id] = t_s
        pending = [j for j in pending if j.id not in result.started_ids]
        for job_id, reason in result.pending_reasons.items():
            reasons.setdefault(job_id, set()).add(reason)
    return starts, reasons


@pytest.mark.parametrize("ask", [{"cpus_per_worker": 3}, {"mem_per_worker_gb": 48.0}])
def test_free_gpus_but_short_cores_or_memory_wait_with_resources(ask):
    """One node, 8 GPUs, 4 cores, 64 GB: two 1-GPU jobs of 3 cores (or 48 GB) run in turn."""
    inventory = sized(1, cores=4, mem_gb=64.0)
    first = job("first", gpus=1, submit_t_s=0, **ask)
    second = job("second", gpus=1, submit_t_s=1, **ask)
    result = schedule(state(inventory, Q, [first, second]))
    assert [s.job_id for s in result.starts] == ["first"]
    assert result.pending_reasons == {"second": Reason.RESOURCES}
    starts, reasons = run_cycles(inventory, [first, second], {"first": 30.0})
    assert starts == {"first": 0.0, "second": 30.0}
    assert reasons == {"second": {Reason.RESOURCES}}


def test_jobs_that_ask_for_nothing_are_not_limited():
    inventory = sized(1, cores=4, mem_gb=64.0)
    result = schedule(state(inventory, Q, [job(f"j{k}", gpus=1) for k in range(8)]))
    assert len(result.starts) == 8


def test_a_node_that_declares_nothing_limits_nothing():
    inventory = sized(1)  # cpu_cores=0, mem_gb=0: unknown, not zero
    pending = [job(f"j{k}", gpus=1, cpus_per_worker=64, mem_per_worker_gb=1e4) for k in range(3)]
    assert len(schedule(state(inventory, Q, pending)).starts) == 3


def test_cpu_jobs_on_a_gpu_node_are_limited_by_cores():
    inventory = sized(2, cores=4)
    pending = [job(f"c{k}", gpus=0, cpus_per_worker=3, submit_t_s=k) for k in range(3)]
    result = schedule(state(inventory, Q, pending))
    placed = {s.job_id: set(s.placement) for s in result.starts}
    assert placed == {"c0": {"n0"}, "c1": {"n1"}}
    assert result.pending_reasons == {"c2": Reason.RESOURCES}


def test_cpu_jobs_on_distinct_nodes_take_one_chunk_per_node():
    inventory = sized(3, cores=4)
    run = [RunningJob(job("busy", gpus=0, cpus_per_worker=4), {"n1": ()}, 0.0)]
    gang = job("gang", gpus=0, workers=2, cpus_per_worker=4, distinct_nodes=True)
    result = schedule(state(inventory, Q, [gang], run))
    assert [set(s.placement) for s in result.starts] == [{"n0", "n2"}]


@pytest.mark.parametrize("policy", ["fabric-aware", "first-fit"])
def test_a_gang_spreads_when_one_node_has_the_gpus_but_not_the_cores(policy):
    """Two 4-GPU workers of 4 cores each fit n0's GPUs, not its 4 cores: one per node."""
    inventory = sized(2, cores=4)
    gang = job("gang", gpus=4, workers=2, cpus_per_worker=4)
    result = schedule(state(inventory, Q, [gang]), placement=policy)
    assert [{k: len(v) for k, v in s.placement.items()} for s in result.starts] == [
        {"n0": 4, "n1": 4}
    ]


def test_cores_too_many_for_any_node_are_unschedulable_and_refused_with_the_figure():
    inventory = sized(2, cores=4, mem_gb=64.0)
    greedy = job("greedy", gpus=1, cpus_per_worker=8)
    assert schedule(state(inventory, Q, [greedy])).pending_reasons == {
        "greedy": Reason.UNSCHEDULABLE
    }
    fabric = PLACEMENT.get("fabric-aware")
    why = never_placeable(inventory, greedy, fabric)
    assert why is not None
    assert why.startswith("a worker needs 8 cores on one node (--cpus-per-task")
    assert "has 4" in why
    big = job("big", gpus=1, mem_per_worker_gb=100.0)
    why = never_placeable(inventory, big, fabric)
    assert why is not None
    assert why.startswith("--mem asks 100 GB")
    assert "64 GB" in why
    assert never_placeable(inventory, job("ok", gpus=1, cpus_per_worker=4), fabric) is None


def test_a_gang_whose_cores_never_fit_together_is_unschedulable():
    """Three 3-core workers on two 4-core nodes: each fits a node, the gang never does."""
    inventory = sized(2, cores=4)
    gang = job("gang", gpus=1, workers=3, cpus_per_worker=3)
    assert schedule(state(inventory, Q, [gang])).pending_reasons == {"gang": Reason.UNSCHEDULABLE}
    why = never_placeable(inventory, gang, PLACEMENT.get("fabric-aware"))
    assert why is not None
    assert "hold at most 2 such workers" in why


def test_a_preemptor_that_needs_the_victims_cores_gets_them():
    """GPUs are free; only r2 holds cores. r1 is cheaper but frees none: r2 is the victim."""
    q = flat_queues({"a": 64}, priority_preemption=True)
    inventory = sized(1, cores=4)
    run = [
        RunningJob(job("r1", gpus=1), {"n0": (0,)}, 0.0, last_checkpoint_t_s=99.0),
        RunningJob(job("r2", gpus=1, cpus_per_worker=4), {"n0": (1,)}, 0.0),
    ]
    hi = job("hi", gpus=1, cpus_per_worker=2, priority=10)
    result = schedule(state(inventory, q, [hi], run), 100.0)
    assert [(p.job_id, p.reason) for p in result.preemptions] == [("r2", PreemptReason.PRIORITY)]
    assert result.pending_reasons == {"hi": Reason.PREEMPTING}


def test_backfill_does_not_take_the_cores_a_reservation_needs():
    """x holds 6 of 8 cores until 100; head needs all 8 then. `long` (ends 500) would take
    the 2 free cores and delay it; `short` (ends 50) may use them."""
    inventory = sized(1, cores=8)
    run = [running(job("x", gpus=4, cpus_per_worker=6, walltime_s=100.0), "n0:0-3")]
    pending = [
        job("head", gpus=1, cpus_per_worker=8, walltime_s=1000.0, submit_t_s=0),
        job("long", gpus=1, cpus_per_worker=2, walltime_s=500.0, submit_t_s=1),
        job("short", gpus=1, cpus_per_worker=2, walltime_s=50.0, submit_t_s=2),
    ]
    result = schedule(state(inventory, Q, pending, run), backfill="easy")
    assert result.reservations["head"].t_s == 100.0
    assert [(s.job_id, s.reason) for s in result.starts] == [("short", StartReason.BACKFILL)]
    assert result.pending_reasons == {"head": Reason.RESOURCES, "long": Reason.PRIORITY}


def test_estimated_start_waits_for_the_cores():
    inventory = sized(1, cores=4)
    s = state(
        inventory, Q, [], [running(job("x", gpus=1, cpus_per_worker=3, walltime_s=70.0), "n0:0")]
    )
    assert estimate_start_t_s(s, job("y", gpus=1, cpus_per_worker=2), 10.0) == 70.0
    assert estimate_start_t_s(s, job("z", gpus=1, cpus_per_worker=1), 10.0) == 10.0


# -- properties: random clusters whose nodes declare cores and memory ------------------------


@st.composite
def states_with_cores(draw):
    """`cluster_states` with cores and memory on the nodes and asked by the jobs; running
    jobs are kept only where their cores and memory fit."""
    s = draw(cluster_states())
    inventory = [
        replace(
            n,
            cpu_cores=draw(st.sampled_from([0, 4, 8])),
            mem_gb=draw(st.sampled_from([0.0, 64.0])),
        )
        for n in s.nodes
    ]
    free = {n.name: (n.cpu_cores or 10**9, n.mem_gb or 1e9) for n in inventory}
    run = []
    for r in s.running:
        cores = draw(st.sampled_from([0, 0, 1, 2, 4]))
        mem_gb = draw(st.sampled_from([0.0, 16.0]))
        (name,) = r.placement
        if free[name][0] >= cores and free[name][1] >= mem_gb:
            free[name] = (free[name][0] - cores, free[name][1] - mem_gb)
            job_ = replace(r.job, cpus_per_worker=cores, mem_per_worker_gb=mem_gb)
            run.append(replace(r, job=job_))
    pending = [
        replace(
            j,
            cpus_per_worker=draw(st.sampled_from([0, 0, 1, 2, 3, 5])),
            mem_per_worker_gb=draw(st.sampled_from([0.0, 0.0, 16.0, 40.0])),
        )
        for j in s.pending
    ]
    return ClusterState(inventory, s.queues, pending, run)


def booked(placement, j: Job) -> dict[str, tuple[int, float]]:
    """Cores and memory a placement of `j` books per node (chunks x per-worker ask)."""
    out = {}
    for name, gpus in placement.items():
        k = len(gpus) // j.gpus_per_worker if j.gpus_per_worker else j.workers // len(placement)
        out[name] = (k * j.cpus_per_worker, k * j.mem_per_worker_gb)
    return out


@examples(25, 100, SETTINGS)
@given(states_with_cores(), CONFIGS)
def test_no_node_is_given_more_cores_or_memory_than_it_declares(s, config):
    result = cycle(s, NOW, config)
    assert cycle(s, NOW, config, CycleCache()) == result
    pending = {j.id: j for j in s.pending}
    used: dict[str, list[float]] = {n.name: [0, 0.0] for n in s.nodes}
    for r in s.running:
        for name, (c, m) in booked(r.placement, r.job).items():
            used[name][0] += c
            used[name][1] += m
    for x in result.starts:
        for name, (c, m) in booked(x.placement, pending[x.job_id]).items():
            used[name][0] += c
            used[name][1] += m
    for n in s.nodes:
        assert not n.cpu_cores or used[n.name][0] <= n.cpu_cores
        assert not n.mem_gb or used[n.name][1] <= n.mem_gb + 1e-9


@examples(25, 100, SETTINGS)
@given(states_with_cores(), st.sampled_from(["easy", "conservative"]))
def test_backfill_never_delays_a_reservation_of_cores(s, backfill):
    assert_backfill_keeps_reservations(s, backfill)


@examples(10, 50, SETTINGS)
@given(states_with_cores(), LIVENESS_CONFIGS)
def test_driven_to_the_end_every_job_that_fits_its_cores_ends(s, config):
    s = _finite(s)
    runtime = {j.id: j.walltime_s for j in s.pending} | {r.id: r.job.walltime_s for r in s.running}
    run = drive(s, config, runtime_s=runtime, until_t_s=30_000.0, dt_s=25.0)
    for j in s.pending:
        if fits_empty_cluster(s, j, config):
            assert j.id in run.ended, (j.id, [e for e in run.log if e[2] == j.id][-5:])
