"""Tiny traces whose schedules can be checked by hand: FIFO vs EASY, and a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from railyard.sched import Node
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.driver import RunLog, SimConfig, Simulation
from railyard.sim.failures import FailureModel, InjectedFailure
from railyard.sim.metrics import summarize
from railyard.sim.sweep import policy_config
from railyard.sim.traces import load_trace
from railyard.sim.workload import TraceJob, Workload

FIXTURES = Path(__file__).parent / "fixtures"
NO_CHECKPOINTS = CheckpointPolicy(rule=IntervalRule.NONE)


def two_nodes() -> list[Node]:
    return [Node(f"n{i}", "H100", 8, path=("su0", "su0-lg0")) for i in range(2)]


def run(policy: str, workload: Workload, **kw: object) -> RunLog:
    config = SimConfig(scheduler=policy_config(policy), checkpoint=NO_CHECKPOINTS, **kw)  # type: ignore[arg-type]
    return Simulation(two_nodes(), workload, config).run()


def times(log: RunLog) -> dict[str, tuple[float | None, float | None]]:
    return {k: (r.first_start_t_s, r.end_t_s) for k, r in log.records.items()}


# Two 8-GPU nodes. a: t=0, 8 GPUs, 100 s. b: t=1, 16 GPUs, 50 s. c: t=2, 8 GPUs, 200 s.
# d: t=3, 8 GPUs, 50 s. Walltime estimates are exact.
#
# Strict FIFO (no backfill): a takes n0 at 0. b needs both nodes and waits; c and d may not
# pass it, so n1 idles. a ends at 100: b runs 100-150, then c (150-350) and d (150-200).
FIFO_EXPECTED = {"a": (0.0, 100.0), "b": (100.0, 150.0), "c": (150.0, 350.0), "d": (150.0, 200.0)}
#
# Greedy FIFO (no reservations, no blocking): a takes n0 at 0. b waits. c takes n1 at 2
# (nothing holds it for b), ends 202. d finds no node at 3; when a ends at 100, d is the
# first job that fits n0: 100-150. b gets both nodes only when c ends at 202: 202-252.
GREEDY_EXPECTED = {"a": (0.0, 100.0), "b": (202.0, 252.0), "c": (2.0, 202.0), "d": (100.0, 150.0)}
#
# EASY: at 1, b (blocked) reserves both nodes for t=100 (a's walltime), so n1 is held. c would
# end at 202 > 100, but c is preemptible: it may cross the reservation and backfills on n1 at
# 2. d finds no free GPU at 3. At 100 a ends and b asks c to yield (reason Reservation); without
# checkpoints c cannot stop in its 120 s grace and finishes at 202; b runs 202-252 with both
# nodes (they were held for it: d may not take n0), then d 252-302.
EASY_EXPECTED = {"a": (0.0, 100.0), "b": (202.0, 252.0), "c": (2.0, 202.0), "d": (252.0, 302.0)}


@pytest.mark.parametrize(
    ("policy", "expected", "mean_jct_s"),
    [
        ("fifo", FIFO_EXPECTED, (100 + 149 + 348 + 197) / 4),
        ("fifo-greedy", GREEDY_EXPECTED, (100 + 251 + 200 + 147) / 4),
        ("easy", EASY_EXPECTED, (100 + 251 + 200 + 299) / 4),
    ],
)
def test_hand_checked_schedule(
    policy: str, expected: dict[str, tuple[float, float]], mean_jct_s: float
) -> None:
    workload = load_trace(FIXTURES / "railyard_trace.csv", "railyard")
    log = run(policy, workload)
    assert times(log) == expected
    summary = summarize(log)
    assert summary["jct"]["mean_s"] == pytest.approx(mean_jct_s)
    assert summary["states"] == {"completed": 4}
    assert summary["goodput"] == pytest.approx(1.0)


def test_a_preemptible_job_that_crossed_a_reservation_yields_when_it_falls_due() -> None:
    """As EASY above, but c checkpoints (every 20 s of work; writing takes no time here, so
    the exact walltimes still hold): asked to yield at 100, it writes a checkpoint and stops
    at once, and b starts then, not at 202."""
    ckpt = CheckpointPolicy(rule=IntervalRule.FIXED, interval_s=20, cost_s=0, restart_s=0)
    config = SimConfig(scheduler=policy_config("easy"), checkpoint=ckpt, record_events=True)
    workload = load_trace(FIXTURES / "railyard_trace.csv", "railyard")
    log = Simulation(two_nodes(), workload, config).run()
    b, c = log.records["b"], log.records["c"]
    assert c.first_start_t_s == 2.0
    assert c.preemptions == 1
    assert b.first_start_t_s is not None
    assert b.first_start_t_s == 100.0
    assert {r.state for r in log.records.values()} == {"completed"}
    signals = [(t, what) for t, kind, what in log.event_log if kind == "preempt_signal"]
    assert signals == [(100.0, "c")]


def test_events_are_logged_in_order_when_asked() -> None:
    workload = load_trace(FIXTURES / "railyard_trace.csv", "railyard")
    log = run("easy", workload, record_events=True)
    d_events = [(t, kind) for t, kind, what in log.event_log if what == "d"]
    assert d_events == [(3.0, "submit"), (252.0, "start"), (302.0, "finish"), (302.0, "end")]


def test_failure_loses_exactly_the_work_since_the_last_checkpoint() -> None:
    """One 8-GPU job of 1,000 s; checkpoints every 100 s of compute, 10 s each; restart costs
    20 s. Checkpoints complete at 110, 220, 330 (300 s of work saved). The node fails at 335:
    5 s of work is lost (8 x 5 = 40 GPU-s). The node is back at 385; the attempt loads for 20 s
    and computes the remaining 700 s from 405 with 6 more checkpoints: it ends at
    405 + 700 + 60 = 1,165."""
    ckpt = CheckpointPolicy(rule=IntervalRule.FIXED, interval_s=100, cost_s=10, restart_s=20)
    failures = FailureModel(random_failures=False, injected=(InjectedFailure(335, "n0", 50),))
    config = SimConfig(scheduler=policy_config("fifo"), checkpoint=ckpt, failures=failures)
    job = TraceJob("x", 0.0, 8, 1000.0)
    log = Simulation(two_nodes()[:1], Workload.of("one", [job]), config).run()
    rec = log.records["x"]
    assert (rec.first_start_t_s, rec.end_t_s, rec.restarts, rec.failures) == (0.0, 1165.0, 1, 1)
    assert log.lost_gpu_s == pytest.approx(8 * 5)
    assert log.checkpoints == 3 + 6
    assert log.node_failures == 1
    assert log.allocated_gpu_s == pytest.approx(8 * (335 + (1165 - 385)))
    assert summarize(log)["goodput"] == pytest.approx(8000 / (8 * 1115))


def test_without_checkpoints_a_failure_loses_the_whole_attempt() -> None:
    failures = FailureModel(random_failures=False, injected=(InjectedFailure(335, "n0", 50),))
    ckpt = CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0)
    config = SimConfig(scheduler=policy_config("fifo"), checkpoint=ckpt, failures=failures)
    log = Simulation(two_nodes()[:1], Workload.of("one", [TraceJob("x", 0.0, 8, 1000.0)]), config)
    result = log.run()
    assert result.lost_gpu_s == pytest.approx(8 * 335)
    assert result.records["x"].end_t_s == pytest.approx(385 + 1000)


def test_a_trace_deadline_ends_a_job_unrun_in_the_twin(tmp_path: Path) -> None:
    """The twin runs the same lifecycle: b (16 GPUs, 50 s, deadline at 120) cannot start
    before a ends at 100 and would end at 150, so at t=70+ it is past its latest start and
    ends ``deadline`` unrun (kept out of the JCT). Under strict FIFO, c waited behind b on
    the free node; it starts the moment b leaves the queue, well within its own deadline."""
    trace = tmp_path / "t.csv"
    trace.write_text(
        "id,submit_s,gpus,runtime_s,walltime_s,deadline_s\n"
        "a,0,8,100,100,\n"
        "b,1,16,50,50,120\n"
        "c,2,8,50,50,400\n"
    )
    log = run("fifo", load_trace(trace, "railyard"))
    b = log.records["b"]
    assert (b.state, b.first_start_t_s) == ("deadline", None)
    assert b.end_t_s == pytest.approx(70.0)
    start, end = times(log)["c"]
    assert (start, end) == (pytest.approx(70.0), pytest.approx(120.0))
    assert summarize(log)["jct"]["jobs"] == 2
