"""Ordering: priority, hierarchical fair share (converging to weights), aging against starvation."""

from __future__ import annotations

import itertools

import pytest
from sched_fakes import H100, drive, flat_queues, job, nodes, schedule, state

from railyard.sched import Queue, SchedulerConfig, Usage


def first_started(usage: Usage, queues, pending, **config) -> list[str]:
    """Order in which jobs start on a 1-GPU cluster slot by slot: only one fits per cycle."""
    result = schedule(state(nodes(1, gpus=1), queues, pending, usage=usage), **config)
    return [s.job_id for s in result.starts] + [
        j for j, r in result.pending_reasons.items() if r.value == "Resources"
    ]


TEAMS = [
    Queue("org"),
    Queue("t1", parent="org"),
    Queue("p1", parent="t1", nominal_gpus={H100: 8}),
    Queue("p2", parent="t1", nominal_gpus={H100: 8}),
    Queue("t2", parent="org"),
    Queue("p3", parent="t2", nominal_gpus={H100: 8}),
]


@pytest.mark.parametrize(
    ("queues", "usage", "pending", "winner"),
    [
        # equal weights: the queue that used less goes first, although it submitted later
        (
            flat_queues({"a": 8, "b": 8}),
            {"a": 300.0, "b": 100.0},
            [job("ja", "a", submit_t_s=0), job("jb", "b", submit_t_s=5)],
            "jb",
        ),
        # weights 1:3 make 100 vs 300 GPU-s exactly fair: the older job goes first
        (
            flat_queues({"a": 8, "b": 8}, weights={"a": 1, "b": 3}),
            {"a": 100.0, "b": 300.0},
            [job("ja", "a", submit_t_s=5), job("jb", "b", submit_t_s=0)],
            "jb",
        ),
        # ...and 1:3 with equal usage favours b
        (
            flat_queues({"a": 8, "b": 8}, weights={"a": 1, "b": 3}),
            {"a": 100.0, "b": 100.0},
            [job("ja", "a", submit_t_s=0), job("jb", "b", submit_t_s=5)],
            "jb",
        ),
        # fair tree: team t1 used more than t2, so p3 beats p1 although p1 itself used least
        (
            TEAMS,
            {"t1": 100.0, "p1": 0.0, "p2": 100.0, "t2": 50.0, "p3": 50.0},
            [job("j1", "p1", submit_t_s=0), job("j3", "p3", submit_t_s=5)],
            "j3",
        ),
        # priority beats fair share
        (
            flat_queues({"a": 8, "b": 8}),
            {"a": 300.0, "b": 0.0},
            [job("ja", "a", priority=5, submit_t_s=5), job("jb", "b", submit_t_s=0)],
            "ja",
        ),
    ],
)
def test_fair_share_order(queues, usage, pending, winner):
    u = Usage(queue_gpu_s={**usage, "org": sum(usage.values())})
    assert first_started(u, queues, pending)[0] == winner


def test_users_share_their_queue():
    u = Usage(queue_gpu_s={"a": 100.0}, user_gpu_s={("a", "alice"): 100.0, ("a", "bob"): 0.0})
    pending = [job("ja", "a", user="alice", submit_t_s=0), job("jb", "a", user="bob", submit_t_s=5)]
    assert first_started(u, flat_queues({"a": 8}), pending)[0] == "jb"
    assert first_started(u, flat_queues({"a": 8}), pending, ordering="fifo")[0] == "ja"


def saturating(weights: dict[str, float]):
    """Both queues always keep 20 jobs of 4 GPUs x 100 s waiting."""
    ids = itertools.count()

    def arrivals(t_s, pending, running):
        out = []
        for q in weights:
            waiting = sum(1 for j in pending if j.queue == q)
            out += [
                job(f"{q}{next(ids)}", q, gpus=4, walltime_s=100.0, submit_t_s=t_s)
                for _ in range(20 - waiting)
            ]
        return out

    return arrivals


@pytest.mark.parametrize(
    ("ordering", "share_a", "tolerance"), [("fairshare", 0.25, 0.03), ("fifo", 0.5, 0.05)]
)
def test_fair_share_converges_to_weights(ordering, share_a, tolerance):
    weights = {"a": 1.0, "b": 3.0}
    queues = flat_queues({"a": 0, "b": 0}, weights=weights)
    config = SchedulerConfig(ordering=ordering, admission="unlimited", preemption="off")
    trace = drive(
        nodes(4),
        queues,
        saturating(weights),
        config,
        until_t_s=4000.0,
        dt_s=10.0,
        half_life_s=600.0,
        warmup_t_s=1000.0,
    )
    total = trace.gpu_s["a"] + trace.gpu_s["b"]
    assert total == pytest.approx(32 * 3000.0)  # the cluster stayed saturated
    assert trace.gpu_s["a"] / total == pytest.approx(share_a, abs=tolerance)


def starving_big_job(starvation_limit_s: float, backfill: str):
    """Queue `small` (weight 9) streams 1-GPU jobs; at t=20 a 32-GPU job arrives in `big`."""
    ids = itertools.count()

    def arrivals(t_s, pending, running):
        new = [job("big", "big", gpus=8, workers=4, walltime_s=100.0, submit_t_s=t_s)]
        new = new if t_s == 20.0 else []
        waiting = sum(1 for j in pending if j.queue == "small")
        return new + [
            job(
                f"s{next(ids)}",
                "small",
                gpus=1,
                walltime_s=50.0 + 10 * (next(ids) % 5),
                submit_t_s=t_s,
            )
            for _ in range(40 - waiting)
        ]

    queues = flat_queues({"big": 0, "small": 0}, weights={"big": 1, "small": 9})
    config = SchedulerConfig(
        admission="unlimited",
        preemption="off",
        backfill=backfill,
        starvation_limit_s=starvation_limit_s,
    )
    return drive(nodes(4), queues, arrivals, config, until_t_s=3000.0, dt_s=10.0, half_life_s=600.0)


@pytest.mark.parametrize("backfill", ["none", "easy"])
def test_aging_prevents_starvation(backfill):
    trace = starving_big_job(starvation_limit_s=500.0, backfill=backfill)
    assert "big" in trace.start_t_s
    # it waits at most the aging limit plus the longest small job, plus a cycle
    assert trace.start_t_s["big"] <= 20.0 + 500.0 + 90.0 + 10.0


def test_without_aging_the_big_job_starves():
    trace = starving_big_job(starvation_limit_s=float("inf"), backfill="none")
    assert "big" not in trace.start_t_s
