"""Typed stop intents (`sched.stops`): a step's plan names every stop with its cause and
grace, so a driver persists and acts without re-deriving them from the kind of decision."""

from __future__ import annotations

from dataclasses import replace

from sched_fakes import flat_queues, job, nodes, running

from railyard.sched import NodeState, SchedulerConfig, StopCause
from railyard.sched.lifecycle import StepInput, step
from railyard.sched.stops import Stop


def test_a_step_names_each_stop_with_its_cause_and_grace() -> None:
    limited = running(job("late", gpus=2, walltime_s=50.0), "n0:0-1", start_t_s=0.0)
    victim = running(
        job("low", gpus=6, preemptible=True, checkpoint_grace_s=45.0), "n0:2-7", start_t_s=0.0
    )
    lost = running(job("lost", gpus=8), "n1:0-7", start_t_s=0.0)
    high = job("high", gpus=6, priority=1000, submit_t_s=90.0)
    inventory = [replace(n, state=NodeState.DOWN) if n.name == "n1" else n for n in nodes(2)]
    queues = [replace(q, priority_preemption=True) for q in flat_queues({"a": 16})]
    given = StepInput(inventory, queues, [high], [limited, victim, lost], [], 100.0)
    plan = step(given, SchedulerConfig(ordering="priority"))
    assert plan.stops == (
        Stop("late", StopCause.TIME_LIMIT, "TimeLimit"),
        Stop("low", StopCause.PREEMPTED, "Preempted (Priority for high)", 45.0, "high"),
        Stop("lost", StopCause.NODE_DOWN, "NodeDown", 0.0, "NodeDown"),
    )
    assert [(s.handshake, s.requeues) for s in plan.stops] == [
        (False, False),
        (True, True),
        (False, True),
    ]


def test_applying_a_stop_gives_the_running_job_its_cause() -> None:
    run = running(job("j", gpus=1), "n0:0", preempt_for=None)
    preempted = Stop("j", StopCause.PREEMPTED, "Preempted", 30.0, "k").applied(run)
    assert (preempted.stop_cause, preempted.preempt_for) == (StopCause.PREEMPTED, "k")
    timed_out = Stop("j", StopCause.TIME_LIMIT, "TimeLimit").applied(run)
    assert (timed_out.stop_cause, timed_out.preempt_for) == (StopCause.TIME_LIMIT, None)
