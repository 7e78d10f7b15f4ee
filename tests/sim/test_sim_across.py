"""Across-node sweeps in the twin (`sim.across`): the live sweep's gating, search, judging and
drain rule, on a world where a group's all_reduce measures its slowest node's share of healthy.
Four 4-GPU nodes, n3 at half speed; a group test takes 60 s."""

from __future__ import annotations

import pytest

from railyard.sched import Node, Queue, SchedulerConfig
from railyard.sched.health import ACROSS_ONLY
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.driver import SimConfig, Simulation
from railyard.sim.failures import FailureModel, InjectedFailure
from railyard.sim.health import Degradation, HealthWorld, SweepRequest
from railyard.sim.records import RunLog
from railyard.sim.workload import FinalState, TraceJob, Workload

NODES = [Node(f"n{i}", "H100", 4, path=("su0", "su0-lg0")) for i in range(4)]
QUEUES = [Queue("org"), Queue("q", "org", {"H100": 16})]
SLOW = Degradation(0.0, "n3", 0.5)


def run(
    jobs: list[tuple[str, float, int, float]],
    sweeps: tuple[SweepRequest, ...],
    failures: tuple[InjectedFailure, ...] = (),
) -> RunLog:
    trace = [  # `anchor` holds the clock: a workload's first job arrives at 0
        TraceJob(j, t, gpus, run_s, queue="q", user="a", state=FinalState.COMPLETED)
        for j, t, gpus, run_s in [("anchor", 0.0, 1, 1.0), *jobs]
    ]
    config = SimConfig(
        scheduler=SchedulerConfig(ordering="fifo", backfill="easy"),
        checkpoint=CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0),
        failures=FailureModel(random_failures=False, injected=failures),
        health=HealthWorld(ACROSS_ONLY, (SLOW,), sweeps=sweeps, across_test_s=60.0),
        record_events=True,
    )
    return Simulation(NODES, Workload.of("sweep", trace), config, QUEUES).run()


def notes(log: RunLog) -> list[tuple[float, str]]:
    return [(t, what) for t, kind, what in log.event_log if kind == "sweep"]


def starts(log: RunLog) -> dict[str, float]:
    return {what: t for t, kind, what in log.event_log if kind == "start"}


def test_a_sweep_finds_the_slow_node_and_drains_it_as_live_does() -> None:
    log = run([("late", 500.0, 16, 10.0)], (SweepRequest(10.0),))
    assert notes(log) == [
        (10.0, "asked n0,n1,n2,n3"),
        (10.0, "test n0,n1,n2,n3"),
        (70.0, "slow n0,n1,n2,n3"),
        (70.0, "test n0,n1"),
        (130.0, "ok n0,n1"),
        (130.0, "test n2,n3"),
        (190.0, "slow n2,n3"),
        (190.0, "test n2,n0"),
        (250.0, "ok n2,n0"),
        (250.0, "test n3,n0"),  # a pair resolved beside a node known good
        (310.0, "slow n3,n0"),
        (310.0, "n3 draining"),
    ]
    assert (310.0, "admin", "n3 drained") in log.event_log
    # health hands n3 to repair (`repair_s`), as after a failing check; repaired, it waits
    # for its own check, which passes; then `late` (16 GPUs) has all four nodes again
    repaired_t_s = 310.0 + 4 * 3600.0
    assert (repaired_t_s + 180.0, "checked", "n3 pass") in log.event_log
    assert starts(log)["late"] == repaired_t_s + 180.0
    assert log.health is not None
    assert log.health["sweeps_done"] == 1
    assert log.health["sweeps_tests"] == 5
    assert log.health["sweeps_blamed"] == 1
    assert log.health["slow_nodes_found"] == 1
    assert log.health["mean_detection_s"] == 310.0  # slow from 0, found at 310
    assert log.health["sweep_gpu_s"] == pytest.approx((16 + 8 * 4) * 60.0)


def test_a_sweeps_nodes_take_no_job_until_it_ends() -> None:
    """The sweep over n0-n2 holds them; n3, outside it, takes work meanwhile."""
    jobs = [("first", 0.0, 4, 30.0), ("small", 20.0, 4, 30.0), ("wide", 20.0, 8, 30.0)]
    log = run(jobs, (SweepRequest(10.0, ("n0", "n1", "n2")),))
    began = starts(log)
    assert began["first"] == 0.0
    first_test = next(t for t, what in notes(log) if what.startswith("test "))
    assert first_test == 30.0  # once `first` left its node idle
    swept = [t for t, what in notes(log) if what.startswith(("ok ", "slow "))]
    assert swept == [90.0]  # n0-n2 are healthy: one test passes, nothing changes
    assert began["small"] == 20.0  # on n3, outside the sweep, at n3's half speed
    assert began["wide"] == 90.0  # 8 GPUs: only the held nodes could take it
    assert log.health is not None
    assert log.health["sweeps_blamed"] == 0


def test_a_sweep_whose_node_goes_down_stops_with_the_reason() -> None:
    """n1 fails during the first test: the test ends with no figure (slow), and its next
    group, n0 and n1, can never be tested; a second sweep asked meanwhile is refused."""
    failure = (InjectedFailure(40.0, "n1", 3600.0),)
    log = run([("later", 500.0, 4, 10.0)], (SweepRequest(10.0), SweepRequest(20.0)), failure)
    assert notes(log) == [
        (10.0, "asked n0,n1,n2,n3"),
        (10.0, "test n0,n1,n2,n3"),
        (20.0, "asked (refused)"),
        (40.0, "slow n0,n1,n2,n3"),
        (40.0, "stopped: n1 is down (): its group cannot be tested"),
    ]
    assert log.health is not None
    assert (log.health["sweeps_stopped"], log.health["sweeps_refused"]) == (1, 1)
    assert log.health["slow_nodes_found"] == 0  # n3 stays slow, and in service
    assert starts(log)["later"] == 500.0  # the stopped sweep let its nodes go
