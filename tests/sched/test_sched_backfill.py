"""Reservations and backfill: EASY never delays the head job; conservative protects all."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched import (
    Reason,
    RunningJob,
    SchedulerConfig,
    StartReason,
    estimate_start_t_s,
)

Q = flat_queues({"a": 1024})


def three_nodes(**head: object):
    """n0 busy until 100, n1 busy until 300, n2 free; the head job wants all three nodes."""
    run = [
        running(job("x", gpus=8, walltime_s=100.0), "n0:0-7"),
        running(job("y", gpus=8, walltime_s=300.0), "n1:0-7"),
    ]
    pending = [
        job("head", gpus=8, workers=3, walltime_s=1000.0, submit_t_s=0, **head),
        job("long", gpus=8, walltime_s=500.0, submit_t_s=1),
        job("short", gpus=8, walltime_s=200.0, submit_t_s=2),
    ]
    return state(nodes(3, per_lg=4), Q, pending, run)


def test_easy_backfills_only_jobs_that_cannot_delay_the_head():
    result = schedule(three_nodes(), backfill="easy")
    assert result.reservations["head"].t_s == 300.0
    assert set(result.reservations["head"].placement) == {"n0", "n1", "n2"}
    assert [(s.job_id, s.reason) for s in result.starts] == [("short", StartReason.BACKFILL)]
    assert result.pending_reasons == {"head": Reason.RESOURCES, "long": Reason.PRIORITY}


def test_without_backfill_the_first_fitting_job_takes_the_free_node():
    result = schedule(three_nodes(), backfill="none")
    assert [s.job_id for s in result.starts] == ["long"]
    assert result.reservations == {}


def test_strict_order_lets_no_job_pass_the_blocked_head():
    """Slurm's sched/builtin: n2 stays idle until the head can start."""
    result = schedule(three_nodes(), backfill="strict")
    assert result.starts == ()
    assert result.reservations == {}
    assert result.pending_reasons == {
        "head": Reason.RESOURCES,
        "long": Reason.PRIORITY,
        "short": Reason.PRIORITY,
    }


def test_strict_order_is_not_held_up_by_a_job_over_its_quota():
    """A job waiting for quota, not GPUs, does not stop the jobs behind it (as in Slurm,
    where a job held by a QOS limit is skipped)."""
    queues = flat_queues({"a": 8, "b": 64}, borrow={"a": 0})
    run = [running(job("mine", queue="a", gpus=8), "n0:0-7")]
    pending = [
        job("over", queue="a", gpus=8),
        job("next", queue="b", gpus=8, workers=2, submit_t_s=1.0),
    ]
    result = schedule(state(nodes(3), queues, pending, run), backfill="strict")
    assert [s.job_id for s in result.starts] == ["next"]
    assert result.pending_reasons == {"over": Reason.QUOTA}


def test_strict_order_blocks_only_the_flavor_it_waits_for():
    inventory = [*nodes(2), *nodes(1, flavor="L40S", prefix="l")]
    run = [running(job("x", gpus=8), "n0:0-7")]
    pending = [
        job("head", gpus=8, workers=2, submit_t_s=0),
        job("h100", gpus=1, submit_t_s=1),
        job("eval", gpus=1, flavor="L40S", submit_t_s=2),
    ]
    s = state(inventory, Q, pending, run)
    result = schedule(s, backfill="strict", admission="unlimited")
    assert [s.job_id for s in result.starts] == ["eval"]
    assert result.pending_reasons == {"head": Reason.RESOURCES, "h100": Reason.PRIORITY}


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_backfill_never_delays_the_reservation(backfill):
    s = three_nodes()
    result = schedule(s, backfill=backfill)
    reserved_t_s = result.reservations["head"].t_s
    started = {x.job_id: x for x in result.starts}
    after = replace(
        s,
        pending=tuple(j for j in s.pending if j.id not in started),
        running=(
            *s.running,
            *(RunningJob(j, started[j.id].placement, 0.0) for j in s.pending if j.id in started),
        ),
    )
    assert estimate_start_t_s(after, s.pending[0], 0.0) <= reserved_t_s
    # and the bound is tight: the head could not start earlier even with nothing backfilled
    assert estimate_start_t_s(s, s.pending[0], 0.0) == reserved_t_s


def two_nodes_case():
    """n0 busy until 100; n1 half busy until 200. j1 and j2 want a node; j3 wants 4 GPUs.

    EASY protects only j1 (n0 at 100), so j3 backfills on n1 and delays j2. Conservative
    also reserves n1 at 200 for j2, so j3 (ending at 500) must wait.
    """
    run = [
        running(job("x", gpus=8, walltime_s=100.0), "n0:0-7"),
        running(job("y", gpus=4, walltime_s=200.0), "n1:0-3"),
    ]
    pending = [
        job("j1", gpus=8, walltime_s=1000.0, submit_t_s=0),
        job("j2", gpus=8, walltime_s=1000.0, submit_t_s=1),
        job("j3", gpus=4, walltime_s=500.0, submit_t_s=2),
    ]
    return state(nodes(2), Q, pending, run)


def test_easy_and_conservative_differ():
    easy = schedule(two_nodes_case(), backfill="easy")
    assert [(s.job_id, s.placement) for s in easy.starts] == [("j3", {"n1": (4, 5, 6, 7)})]
    assert set(easy.reservations) == {"j1"}

    cons = schedule(two_nodes_case(), backfill="conservative")
    assert cons.starts == ()
    # every blocked job holds a reservation; j3 fits after j1 ends (n1 from 200 is j2's)
    assert {k: r.t_s for k, r in cons.reservations.items()} == {"j1": 100, "j2": 200, "j3": 1100}
    assert cons.pending_reasons["j3"] is Reason.PRIORITY


def test_jobs_without_estimates_block_no_reservation_unless_a_default_applies():
    s = three_nodes()
    endless = replace(
        s, running=tuple(replace(r, job=replace(r.job, walltime_s=None)) for r in s.running)
    )
    result = schedule(endless, backfill="easy")
    assert result.reservations == {}
    assert [x.job_id for x in result.starts] == ["long"]

    result = schedule(endless, backfill="easy", default_walltime_s=300.0)
    assert result.reservations["head"].t_s == 300.0


def test_config_rejects_unknown_policy_names():
    with pytest.raises(KeyError, match="known"):
        SchedulerConfig(backfill="aggressive")


def _full_behind_a_head(free_gpu: bool):
    """Two busy nodes (n1 has one GPU free when `free_gpu`); the head wants both whole
    nodes and reserves them; two 1-GPU jobs too long to backfill wait behind it."""
    run = [
        running(job("x", gpus=8, walltime_s=100.0), "n0:0-7"),
        running(
            job("y", gpus=7 if free_gpu else 8, walltime_s=200.0),
            "n1:0-6" if free_gpu else "n1:0-7",
        ),
    ]
    pending = [
        job("head", gpus=8, workers=2, walltime_s=1000.0, submit_t_s=0),
        job("a", gpus=1, walltime_s=5000.0, submit_t_s=1),
        job("b", gpus=1, walltime_s=5000.0, submit_t_s=2),
    ]
    return state(nodes(2), Q, pending, run)


@pytest.mark.parametrize("free_gpu", [False, True])
def test_behind_a_reserved_head_jobs_wait_for_priority_whether_a_gpu_is_free_or_not(free_gpu):
    """As squeue shows a busy partition: the next job waits for Resources, the rest for
    Priority. Judged by whether a GPU happened to be free at the cycle's end, the jobs
    behind said Resources on a full cluster and Priority beside one free GPU, and ten
    thousand reasons turned over every few cycles (the live loop wrote them all)."""
    result = schedule(_full_behind_a_head(free_gpu), backfill="easy")
    assert result.starts == ()
    assert set(result.reservations) == {"head"}
    assert result.pending_reasons == {
        "head": Reason.RESOURCES,
        "a": Reason.PRIORITY,
        "b": Reason.PRIORITY,
    }


def test_with_no_job_keeping_gpus_every_job_short_of_them_waits_for_resources():
    result = schedule(_full_behind_a_head(free_gpu=False), backfill="none")
    assert result.reservations == {}
    assert set(result.pending_reasons.values()) == {Reason.RESOURCES}
