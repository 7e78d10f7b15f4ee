"""Down nodes, requeue after a stop, usage accrual, arrays and gang sizing."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sched_fakes import H100, flat_queues, job, nodes, running, schedule, state

from railyard.sched import (
    Job,
    NodeState,
    Reason,
    Requeue,
    Usage,
    accrue_usage,
    expand_array,
)
from railyard.sched.lifecycle import EndState, Exit, ExitKind, requeue_after_stop, settle
from railyard.sched.model import StopCause

Q = flat_queues({"a": 64})


@pytest.mark.parametrize(
    ("node_state", "requeued"),
    [
        (NodeState.DOWN, ["gang", "solo"]),
        (NodeState.DRAINING, []),  # draining lets running work finish
        (NodeState.DRAINED, []),
        (NodeState.READY, []),
    ],
)
def test_jobs_on_down_nodes_are_requeued(node_state, requeued):
    run = [
        running(job("gang", gpus=4, workers=2), "n0:0-3 n1:0-3"),
        running(job("solo", gpus=2), "n0:4-5"),
        running(job("other", gpus=8), "n2:0-7"),
    ]
    inventory = nodes(3, states={"n0": node_state})
    result = schedule(state(inventory, Q, [], run))
    assert result.requeues == tuple(Requeue(j) for j in requeued)


def test_requeued_job_comes_back_with_one_more_restart():
    r = running(job("j", gpus=8, submit_t_s=5.0, restart_count=2), "n0:0-7", start_t_s=50.0)
    again = requeue_after_stop(r, 60.0)
    assert (again.id, again.restart_count, again.submit_t_s) == ("j", 3, 5.0)
    assert again.attained_gpu_s == 8 * 10.0  # the attempt's service counts
    assert requeue_after_stop(r, 60.0, keep_submit_time=False).submit_t_s == 50.0


def test_down_node_gpus_are_not_reused_in_the_same_cycle():
    run = [running(job("r", gpus=8, workers=2), "n0:0-7 n1:0-7")]
    inventory = nodes(2, states={"n0": NodeState.DOWN})
    result = schedule(state(inventory, Q, [job("j", gpus=8)], run))
    assert result.starts == ()
    assert result.pending_reasons == {"j": Reason.RESOURCES}


def test_usage_decays_by_half_life_and_accrues_running_gpus():
    queues = [*flat_queues({"a": 8, "b": 8})]
    usage = Usage(queue_gpu_s={"a": 1000.0, "org": 1000.0}, user_gpu_s={("a", "u"): 1000.0})
    run = [running(job("j", "b", gpus=4, user="v"), "n0:0-3")]
    out = accrue_usage(usage, run, queues, dt_s=60.0, half_life_s=60.0)
    assert out.queue_gpu_s == {"a": 500.0, "org": 500.0 + 240.0, "b": 240.0}
    assert out.user_gpu_s == {("a", "u"): 500.0, ("b", "v"): 240.0}


def test_accrue_rejects_a_zero_half_life():
    with pytest.raises(ValueError, match="half_life_s"):
        accrue_usage(Usage(), [], [], dt_s=1.0, half_life_s=0.0)


def test_arrays_expand_to_independent_jobs():
    parts = expand_array(job("12", gpus=1), range(3))
    assert [(j.id, j.array_parent, j.array_index) for j in parts] == [
        ("12_0", "12", 0),
        ("12_1", "12", 1),
        ("12_2", "12", 2),
    ]
    result = schedule(state(nodes(1), Q, parts))
    assert {s.job_id for s in result.starts} == {"12_0", "12_1", "12_2"}


@pytest.mark.parametrize(("gpus", "shape"), [(4, (1, 4)), (8, (1, 8)), (32, (4, 8))])
def test_total_gpu_count_becomes_a_gang(gpus, shape):
    j = Job.with_total_gpus(id="j", queue="a", flavor=H100, gpus=gpus, gpus_per_node=8)
    assert (j.workers, j.gpus_per_worker) == shape


def test_total_gpu_count_must_fill_whole_nodes():
    with pytest.raises(ValueError, match="whole number"):
        Job.with_total_gpus(id="j", queue="a", flavor=H100, gpus=12, gpus_per_node=8)


@pytest.mark.parametrize(
    ("cause", "kind", "end", "requeued"),
    [
        # exit 0 after the time-limit warning alone (--signal=USR1@60): completed, as in Slurm
        (None, ExitKind.PREEMPTED, EndState.COMPLETED, False),
        (None, ExitKind.COMPLETED, EndState.COMPLETED, False),
        (StopCause.PREEMPTED, ExitKind.PREEMPTED, None, True),  # a real preemption requeues
        (StopCause.TIME_LIMIT, ExitKind.PREEMPTED, EndState.TIMEOUT, False),
        (None, ExitKind.FAILED, EndState.FAILED, False),
    ],
)
def test_an_exit_after_the_warning_signal_alone_is_completed(cause, kind, end, requeued):
    run = running(job("j", gpus=1, warn_before_s=60.0), "n0:0", stop_cause=cause)
    settled = settle(run, Exit("j", 0, kind, exit_code=0), now_t_s=100.0)
    assert settled.end == end
    assert (settled.requeued is not None) == requeued


def test_a_job_waits_for_its_begin_time_and_the_step_wakes_then():
    """sbatch --begin: BeginTime until then, eligible from then on; the plan's next deadline
    is that time, so a simulated clock steps there."""
    from railyard.sched import Reason
    from railyard.sched.config import SchedulerConfig
    from railyard.sched.lifecycle import StepInput, step

    later = job("later", gpus=1, begin_t_s=500.0)
    now_job = job("now", gpus=1)
    inventory, config = nodes(1), SchedulerConfig()
    early = step(StepInput(inventory, Q, [later, now_job], [], [], now_t_s=100.0), config)
    assert early.reasons["later"] == Reason.BEGIN_TIME
    assert [s.job_id for s in early.result.starts] == ["now"]
    assert early.next_deadline_t_s == 500.0
    due = step(StepInput(inventory, Q, [later], [], [], now_t_s=500.0), config)
    assert [s.job_id for s in due.result.starts] == ["later"]


def test_a_job_past_its_latest_start_expires_and_the_step_wakes_just_after_it():
    """sbatch --deadline: a job may start while now + its limit <= its deadline; after that it
    leaves the queue (end state DEADLINE), held or not; the plan's next deadline is just past
    the latest start, so a simulated clock steps there."""
    from railyard.sched.config import SchedulerConfig
    from railyard.sched.lifecycle import StepInput, step

    blocker = running(job("big", gpus=8), "n0:0-7", start_t_s=0.0)
    waits = job("waits", gpus=8, walltime_s=100.0, deadline_t_s=1000.0)
    held = job("held", gpus=1, walltime_s=100.0, deadline_t_s=500.0, hold="user")
    inventory, config = nodes(1), SchedulerConfig()
    early = step(StepInput(inventory, Q, [waits, held], [blocker], [], now_t_s=400.0), config)
    assert early.expired == ()
    assert early.next_deadline_t_s == pytest.approx(400.0)
    assert early.next_deadline_t_s > 400.0
    later = step(StepInput(inventory, Q, [waits, held], [blocker], [], now_t_s=401.0), config)
    assert later.expired == ("held",)
    assert "held" not in later.reasons
    assert later.next_deadline_t_s > 900.0
    # at its latest start it still starts, since it ends exactly by its deadline
    free = step(StepInput(inventory, Q, [waits], [], [], now_t_s=900.0), config)
    assert (free.expired, [s.job_id for s in free.result.starts]) == ((), ["waits"])
    gone = step(StepInput(inventory, Q, [waits], [], [], now_t_s=900.5), config)
    assert (gone.expired, gone.result.starts) == (("waits",), ())


def test_a_deadline_without_any_time_limit_expires_at_once():
    from railyard.sched.config import SchedulerConfig
    from railyard.sched.lifecycle import StepInput, step

    unbounded = job("u", gpus=1, deadline_t_s=1e9)
    plan = step(StepInput(nodes(1), Q, [unbounded], [], [], now_t_s=0.0), SchedulerConfig())
    assert plan.expired == ("u",)


def test_a_met_dependency_is_cleared_and_the_job_waits_from_then():
    """A job that waited 15 days (past las's 14-day starvation limit) for its dependency has
    waited for GPUs from the moment the dependency was met, not from its submission: the step
    reports it `satisfied` (the driver clears the dependency and sets its begin time, Slurm's
    EligibleTime), and the cycle already ranks it so. Starving, a week-long gang would go
    ahead of every level under time slicing; met just now, the 1-hour job of the same age
    goes first."""
    from railyard.sched.config import SchedulerConfig
    from railyard.sched.dependencies import parse_dependency
    from railyard.sched.lifecycle import StepInput, step

    day, now = 86_400.0, 20 * 86_400.0
    deps, _ = parse_dependency("afterany:12")
    week = job("week", gpus=8, walltime_s=7 * day, submit_t_s=now - 15 * day, dependencies=deps)
    hour = job("hour", gpus=8, walltime_s=3600.0, submit_t_s=now - 2 * day)
    config = SchedulerConfig.of(ordering="las", backfill="none", preemption="las")
    plan = step(
        StepInput(nodes(1), Q, [week, hour], [], [], now_t_s=now, job_states={"12": "cancelled"}),
        config,
    )
    assert plan.satisfied == ("week",)
    assert [s.job_id for s in plan.result.starts] == ["hour"]
    waiting = step(
        StepInput(nodes(1), Q, [week, hour], [], [], now_t_s=now, job_states={"12": "running"}),
        config,
    )
    assert (waiting.satisfied, waiting.reasons["week"]) == ((), Reason.DEPENDENCY)
    never_waited = replace(week, dependencies=())  # aged from its submission: starving
    aged = step(StepInput(nodes(1), Q, [never_waited, hour], [], [], now_t_s=now), config)
    assert [s.job_id for s in aged.result.starts] == ["week"]
