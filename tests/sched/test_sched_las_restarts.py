"""Time slicing's restart budget, `unsliced_after_restarts` (issue 56): a job stopped and
restarted that many times is not sliced again and runs to its end. On Gavel's Philly VCs the
longest jobs set `las`'s p99 JCT and were sliced 3-66 times each, every time waiting for
their GPUs again (docs/explanation/scheduler.md); reclaiming lent quota is not bounded by it."""

from __future__ import annotations

import pytest
from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched import ClusterState, PreemptReason, Reason, SchedulerConfig
from railyard.sched.config import TIME_SLICING_DEFAULTS

HOUR = 3600.0
LAS = {
    "ordering": "las",
    "preemption": "las",
    "time_slice_by": "attained",
    "service_levels_gpu_s": tuple(HOUR * 2**i for i in range(10)),
    "slice_level_gap": 1,
}


def one_node(restarts: int) -> tuple[ClusterState, float]:
    """`old` (8 GPUs, 100 GPU-h served, restarted `restarts` times) holds the only node;
    `new` (8 GPUs, never run) waits: by service alone `new` slices `old`."""
    now_t_s = 1000 * HOUR
    old = job("old", gpus=8, preemptible=True, attained_gpu_s=100 * HOUR, restart_count=restarts)
    run = running(old, "n0:0-7", start_t_s=now_t_s - HOUR)
    new = job("new", gpus=8, submit_t_s=now_t_s - 60.0)
    return state(nodes(1), flat_queues({"a": 8}), [new], [run]), now_t_s


@pytest.mark.parametrize(("restarts", "sliced"), [(0, True), (5, True), (6, False), (9, False)])
def test_a_job_restarted_as_often_as_the_budget_is_not_sliced(restarts: int, sliced: bool):
    s, now_t_s = one_node(restarts)
    plan = schedule(s, now_t_s, **LAS, unsliced_after_restarts=6)
    got = [(p.job_id, p.reason) for p in plan.preemptions]
    assert got == ([("old", PreemptReason.TIME_SLICE)] if sliced else [])
    if not sliced:
        assert plan.pending_reasons["new"] is Reason.RESOURCES
    # no budget (None): sliced however often it was restarted
    assert [p.job_id for p in schedule(s, now_t_s, **LAS).preemptions] == ["old"]


def test_the_budget_does_not_bound_a_reclaim():
    """`old` borrows queue b's GPUs; b's own job takes them back whatever the budget."""
    now_t_s = 1000 * HOUR
    old = job("old", "a", gpus=8, preemptible=True, attained_gpu_s=100 * HOUR, restart_count=9)
    new = job("new", "b", gpus=8, submit_t_s=now_t_s - 60.0, attained_gpu_s=200 * HOUR)
    s = state(
        nodes(1),
        flat_queues({"a": 0, "b": 8}),
        [new],
        [running(old, "n0:0-7", start_t_s=now_t_s - HOUR)],
    )
    plan = schedule(s, now_t_s, **LAS, unsliced_after_restarts=0)
    assert [(p.job_id, p.reason) for p in plan.preemptions] == [("old", PreemptReason.RECLAIM)]


def test_the_budget_is_off_by_default_and_is_a_count():
    """Off: on Alibaba's openb a spent budget kept 8-GPU tasks waiting behind long 1-GPU jobs."""
    assert SchedulerConfig.of(preemption="las").unsliced_after_restarts is None
    assert "unsliced_after_restarts" not in TIME_SLICING_DEFAULTS
    assert SchedulerConfig().unsliced_after_restarts is None
    with pytest.raises(ValueError, match="unsliced_after_restarts"):
        SchedulerConfig(unsliced_after_restarts=-1)
