"""The run-time history both drivers share (`sched.history`): which runs count, and the one
refresh rule for when a step sees them."""

from __future__ import annotations

from sched_fakes import job, running

from railyard.sched import SchedulerConfig
from railyard.sched.history import RuntimeHistory
from railyard.sched.lifecycle import EndState, Exit, ExitKind, Settlement, history_run


def test_predictions_change_at_the_first_step_after_a_completion() -> None:
    history = RuntimeHistory()
    assert history.predictions_at(0.0) == {}
    history.record("q", "u", 20.0)
    shown = history.predictions_at(0.0)  # the same instant: the next step sees it
    assert shown == {("q", "u"): 20.0, ("q", None): 20.0}
    history.record("q", "u", 40.0)
    assert shown[("q", "u")] == 20.0  # a step's copy never changes under it
    assert history.predictions_at(1.0)[("q", "u")] == 30.0  # mean of the last two


def test_a_refresh_interval_holds_the_predictions_between_renewals() -> None:
    history = RuntimeHistory(refresh_s=60.0)
    history.record("q", "u", 20.0)
    assert history.predictions_at(0.0)[("q", "u")] == 20.0
    history.record("q", "u", 40.0)
    assert history.predictions_at(59.0)[("q", "u")] == 20.0
    assert history.predictions_at(60.0)[("q", "u")] == 30.0
    history.record("q", "u", 50.0)
    assert history.predictions_at(10.0)[("q", "u")] == 45.0  # the clock went back: renewed


def test_the_configuration_decides_for_both_drivers() -> None:
    off = RuntimeHistory.of(SchedulerConfig(estimate_from_history=False))
    off.record("q", "u", 20.0)
    assert off.predictions_at(0.0) == {}
    slow = RuntimeHistory.of(SchedulerConfig(history_refresh_s=30.0))
    assert (slow.enabled, slow.refresh_s) == (True, 30.0)


def test_only_first_attempts_that_completed_are_runs() -> None:
    first = running(job("j", gpus=1, queue="q", user="u"), "n0:0", start_t_s=10.0)
    again = running(job("k", gpus=1, queue="q", user="u", restart_count=1), "n0:1")
    done = Exit("j", 0, ExitKind.COMPLETED, 0, t_s=25.0)
    completed = Settlement("j", "Completed", EndState.COMPLETED, exit=done)
    assert history_run(completed, first, 99.0) == ("q", "u", 15.0)
    assert history_run(Settlement("j", "Completed", EndState.COMPLETED), first, 99.0) == (
        "q",
        "u",
        89.0,  # no exit time known: the step's
    )
    assert history_run(completed, again, 99.0) is None
    timed_out = Settlement("j", "TimeLimit", EndState.TIMEOUT, exit=done)
    assert history_run(timed_out, first, 99.0) is None
