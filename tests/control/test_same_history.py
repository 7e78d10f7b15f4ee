"""One scenario, two drivers, one history: the simulator and the live control loop apply the
same lifecycle, so they must start, preempt, requeue, time out, drain and give up on the same
jobs at the same instants.

The live loop runs here with the simulator's virtual executor as its in-memory executor (the
real processes of the local executor cannot keep a virtual clock), stepped on the same
instants as the simulator's events; everything else is the production loop on a real store.

Scenario on two 4-GPU nodes, one queue that opted in to priority preemption:
- `1` (4 GPUs, preemptible, 500 s) is preempted at 300 by `2` (8 GPUs, priority 1000);
- array 3 (three 1-GPU tasks of 50 s, `%1`) runs one task at a time;
- `4` (1 GPU, limit 60 s, needs 500 s) ends TIMEOUT;
- n1 drained at 20 takes no new work while `5` runs on; drained at 600, it is DRAINED at once;
- `5` (1 GPU, at most 1 restart) is hit by both failures of n1 and ends NODE_FAIL.

A second scenario estimates run times from history (`sched.history`), where the two drivers
once refreshed predictions differently (the simulator after every completion, the loop every
60 s), on one 4-GPU node:
- `1` (1 GPU, 20 s, no limit) completes at 20: alice's runs now take 20 s;
- `2` (3 GPUs, limit 200 s, needs 500 s) ends TIMEOUT at 200 and adds nothing to the history;
- `3` (4 GPUs, no limit) waits from 30 for `2`'s limit: its reservation is at 200;
- `4` (1 GPU, no limit, 30 s) backfills at 40 on the history's 20 s estimate (ending at 60,
  before the reservation); without that estimate it could not start before 200.

A third runs an across-node sweep (`control.loop.sweeps` live, `sim.across` simulated) on four
4-GPU nodes, n3 at half speed from the start; each group test takes 60 s and measures 100 GB/s
x its slowest node's speed (`sim.across.world_tests`, run by the virtual executor on both
sides), judged against 100 GB/s:
- `1` (16 GPUs, 50 s of work) runs at n3's pace, so it ends at 100, not 50;
- the sweep asked at 50 over every node holds them all: `2` (4 GPUs) at 60 and `3` (12 GPUs)
  at 70 wait; its first test starts at 100, once `1` has left the nodes idle;
- the search (all four, the halves, n2 and n3 each beside n0) blames n3 at 400: n3 is drained
  with live's reason, and `2` and `3` run on the other nodes;
- a second sweep at 600 over n0-n2 passes and changes nothing; `4` (1 GPU) at 610 waits for
  it, n3 being drained.

A fourth holds interactive sessions to an idle limit of 100 s on one 4-GPU node (the live
side's activity is written by the server's own `Activity`, as the terminal bridge writes it):
- session `1` (1000 s open) is used until 50, so its limit falls at 150: it ends TIMEOUT;
- session `2` (80 s) ends by itself at 80, before its limit;
- batch job `3` (300 s) is never idle-stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from tests.control.loop_helpers import add_job

from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.loop.sweeps import AcrossChecks, floor_expectation
from railyard.control.store.database import Store
from railyard.control.store.tables import Counter, EventRow, JobRow, NodeRow, QueueRow, User
from railyard.control.usecases.activity import Activity
from railyard.sched import Node, NodeState, Queue, SchedulerConfig
from railyard.sched.health import ACROSS_ONLY
from railyard.sim.across import world_tests
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.driver import NodeEvent, SimConfig, Simulation
from railyard.sim.engine import Engine
from railyard.sim.executor import VirtualExecutor
from railyard.sim.failures import FailureModel, InjectedFailure
from railyard.sim.health import Degradation, HealthWorld, SweepRequest
from railyard.sim.workload import FinalState, TraceJob, Workload

FLAVOR = "H100"
GRID_S = 10.0
END_S = 1500.0
GRACE_S = 20.0
NO_CKPT = CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0)
SCHED = SchedulerConfig(ordering="priority", backfill="easy", estimate_from_history=False)
NODES = [Node(f"n{i}", FLAVOR, 4, path=("su0", "su0-lg0")) for i in range(2)]
FAILURES = ((150.0, "n1"), (250.0, "n1"))  # each repaired 10 s later
ADMIN = (
    NodeEvent(20.0, "n1", "drain"),  # its jobs run on; a failure and repair then clear it
    NodeEvent(600.0, "n1", "drain"),  # idle: drained at once
    NodeEvent(1000.0, "n1", "resume"),
)

# id, submit, gpus, runtime, fields (as the trace and as the job row)
Jobs = list[tuple[str, float, int, float, dict[str, object]]]
JOBS: Jobs = [
    ("1", 0.0, 4, 500.0, {"priority": 0, "preemptible": True}),  # low
    ("2", 300.0, 8, 100.0, {"priority": 1000}),  # high
    ("3_0", 0.0, 1, 50.0, {"array": ("3", 0, 1)}),
    ("3_1", 0.0, 1, 50.0, {"array": ("3", 1, 1)}),
    ("3_2", 0.0, 1, 50.0, {"array": ("3", 2, 1)}),
    ("4", 0.0, 1, 500.0, {"walltime_s": 60.0}),  # limit
    ("5", 0.0, 1, 400.0, {"max_restarts": 1}),  # flaky
]


@dataclass(frozen=True)
class Scenario:
    jobs: Jobs
    sched: SchedulerConfig = SCHED
    nodes: list[Node] = field(default_factory=lambda: NODES)
    failures: tuple[tuple[float, str], ...] = FAILURES
    admin: tuple[NodeEvent, ...] = ADMIN
    health: HealthWorld | None = None  # slow nodes and sweeps (`sim.health`)
    quota_gpus: int = 8
    idle_limit_s: float | None = None

    @property
    def queues(self) -> list[Queue]:
        return [
            Queue("org"),
            Queue(
                "q", "org", {FLAVOR: self.quota_gpus}, priority_preemption=True,
                idle_limit_s=self.idle_limit_s,
            ),
        ]  # fmt: skip


ALL_RULES = Scenario(JOBS)
HISTORY = Scenario(
    [
        ("1", 0.0, 1, 20.0, {}),
        ("2", 0.0, 3, 500.0, {"walltime_s": 200.0}),
        ("3", 30.0, 4, 50.0, {}),
        ("4", 40.0, 1, 30.0, {}),
    ],
    sched=SchedulerConfig(ordering="fifo", backfill="easy", estimate_from_history=True),
    nodes=NODES[:1],
    failures=(),
    admin=(),
)
SWEEP = Scenario(
    [
        ("1", 0.0, 16, 50.0, {}),
        ("2", 60.0, 4, 100.0, {}),
        ("3", 70.0, 12, 50.0, {}),
        ("4", 610.0, 1, 20.0, {}),
    ],
    sched=SchedulerConfig(ordering="fifo", backfill="easy", estimate_from_history=False),
    nodes=[Node(f"n{i}", FLAVOR, 4, path=("su0", "su0-lg0")) for i in range(4)],
    failures=(),
    admin=(),
    quota_gpus=16,
    health=HealthWorld(
        ACROSS_ONLY,
        (Degradation(0.0, "n3", 0.5),),
        sweeps=(SweepRequest(50.0), SweepRequest(600.0, ("n0", "n1", "n2"))),
        across_test_s=60.0,
        across_busbw_gbps=100.0,
    ),
)

IDLE = Scenario(
    [
        ("1", 0.0, 1, 1000.0, {"interactive": True, "active_s": 50.0}),
        ("2", 0.0, 1, 80.0, {"interactive": True, "active_s": 0.0}),
        ("3", 0.0, 1, 300.0, {}),
    ],
    nodes=NODES[:1],
    failures=(),
    admin=(),
    idle_limit_s=100.0,
)


def simulated(scenario: Scenario) -> list[tuple[float, str, str]]:
    trace = []
    for job_id, submit, gpus, runtime, f in scenario.jobs:
        parent, index, limit = f.get("array", (None, None, None))  # type: ignore[misc]
        trace.append(
            TraceJob(
                job_id,
                submit,
                gpus,
                runtime,
                queue="q",
                user="alice",
                priority=int(f.get("priority", 0)),  # type: ignore[call-overload]
                preemptible=bool(f.get("preemptible", False)),
                walltime_s=f.get("walltime_s"),  # type: ignore[arg-type]
                state=FinalState.COMPLETED,
                array_parent=parent,
                array_index=index,
                array_max_running=limit,
                max_restarts=f.get("max_restarts", 3),  # type: ignore[arg-type]
                interactive=bool(f.get("interactive", False)),
                active_s=f.get("active_s"),  # type: ignore[arg-type]
            )
        )
    failures = FailureModel(
        random_failures=False,
        injected=tuple(InjectedFailure(t, node, 10.0) for t, node in scenario.failures),
    )
    config = SimConfig(
        scheduler=scenario.sched,
        checkpoint=NO_CKPT,
        failures=failures,
        grace_s=GRACE_S,
        cycle_interval_s=GRID_S,
        skip_idle_ticks=False,
        record_events=True,
        node_events=scenario.admin,
        health=scenario.health,
    )
    log = Simulation(scenario.nodes, Workload.of("same", trace), config, scenario.queues).run()
    out = []
    for t, kind, what in log.event_log:
        if kind == "sweep":
            out.append(_sweep_note(t, what))
        elif kind == "end":
            out.append((t, f"end:{log.records[what].state}", what))
        elif kind in ("start", "requeue"):
            out.append((t, kind, what))
        elif kind == "preempt_signal":
            out.append((t, "preempt", what))
        elif kind == "admin" and what.endswith("drained"):
            out.append((t, "drained", what.split()[0]))
    return sorted(out)


def live(scenario: Scenario, store: Store, state_dir: Path) -> list[tuple[float, str, str]]:
    with store.session() as s:
        for n in scenario.nodes:
            s.add(NodeRow(name=n.name, flavor=FLAVOR, gpus=4, path=list(n.path), updated_t_s=0))
        s.add(User(id=1, name="admin", is_admin=True, created_t_s=0.0))
        s.add(User(id=2, name="alice", is_admin=False, created_t_s=0.0))
        s.add(QueueRow(name="org", nominal_gpus={}, created_t_s=0.0))
        s.flush()
        s.add(
            QueueRow(
                name="q",
                parent="org",
                nominal_gpus={FLAVOR: scenario.quota_gpus},
                priority_preemption=True,
                idle_limit_s=scenario.idle_limit_s,
                created_t_s=0.0,
            )
        )
        s.add(Counter(name="job", value=0))
    engine = Engine()
    health = scenario.health
    executor = VirtualExecutor(engine, NO_CKPT, world_tests(health) if health else None)
    for job_id, _, gpus, runtime, _ in scenario.jobs:
        executor.register(job_id, runtime, gpus, FinalState.COMPLETED)
    floor = floor_expectation(health.across_busbw_gbps) if health else None
    loop = Loop(
        store,
        executor,
        LoopConfig(state_dir=state_dir, scheduler=scenario.sched, across_expect=floor),
        clock=lambda: engine.now_t_s,
    )
    repairs: dict[float, str] = {}
    sweeps = SweepWatch(loop.across)
    activity = Activity(store, lambda: engine.now_t_s, every_s=0.0)
    t = 0.0
    while t <= END_S:
        engine.run(lambda _t, ev: executor.on_event(ev), until_t_s=t)
        engine.now_t_s = t
        for job_id, submit, gpus, _, f in scenario.jobs:
            if submit == t:
                _submit(store, job_id, gpus, submit, f)
        for fail_t, node in scenario.failures:
            if fail_t == t:
                _set_node(store, node, NodeState.DOWN)
                executor.fail_node(node)
                repairs[t + 10.0] = node
        if t in repairs:
            _set_node(store, repairs.pop(t), NodeState.READY)
        for ev in scenario.admin:
            if ev.t_s == t:
                _set_node(
                    store, ev.node, NodeState.DRAINING if ev.action == "drain" else NodeState.READY
                )
        for job_id, submit, _, _, f in scenario.jobs:  # sessions started at their submit
            if f.get("active_s") and submit + f["active_s"] == t:  # type: ignore[operator]
                assert activity.touch(job_id)
        for d in health.degradations if health else ():
            if d.t_s == t:
                executor.speed[d.node] = d.speed
        for sweep in health.sweeps if health else ():
            if sweep.t_s == t:
                with store.session() as s:
                    sweeps.asked(t, loop.across.request(s, sweep.nodes, "admin"))
        loop.step()
        sweeps.look(t)
        while executor.has_reports():  # a cancel reports at once: settle it in this instant
            loop.step()
            sweeps.look(t)
        t += GRID_S
    with store.session() as s:
        events = s.execute(select(EventRow.t_s, EventRow.kind, EventRow.job_id, EventRow.message))
        out = []
        for t_s, kind, job_id, message in events:
            if kind in ("start", "preempt", "requeue"):
                out.append((t_s, kind, job_id))
            elif kind in ("completed", "failed", "cancelled", "timeout", "node_fail"):
                out.append((t_s, f"end:{kind}", job_id))
            elif kind == "drained":
                out.append((t_s, "drained", message.split()[1]))
            elif message.startswith("health: node "):  # the health rule changed a node
                out.append((t_s, f"health:{kind}", message.split()[2]))
    return sorted(out + sweeps.events)


def _sweep_note(t_s: float, what: str) -> tuple[float, str, str]:
    """A simulator's sweep note in the history's words: `asked N,..`, `test G`, `ok G`,
    `slow G`, `stopped: why`, or a node's new state `N draining`."""
    word, _, rest = what.partition(" ")
    if word in ("asked", "test", "ok", "slow", "stopped:"):
        return t_s, f"sweep-{word.rstrip(':')}", rest
    return t_s, f"health:{rest}", word


class SweepWatch:
    """The live sweep's story, read off `AcrossChecks` after each step in the same words."""

    def __init__(self, across: AcrossChecks) -> None:
        self.across = across
        self.events: list[tuple[float, str, str]] = []
        self._started: set[str] = set()
        self._judged: dict[int, int] = {}  # sweep (by id) -> its tests already told
        self._stopped: set[int] = set()

    def asked(self, t_s: float, nodes: list[str]) -> None:
        self.events.append((t_s, "sweep-asked", ",".join(nodes)))

    def look(self, t_s: float) -> None:
        for sweep in (self.across.last, self.across.sweep):  # the older one's tests first
            if sweep is None:
                continue
            for test in sweep.tests[self._judged.get(id(sweep), 0) :]:
                word = "sweep-ok" if test.ok else "sweep-slow"
                self.events.append((t_s, word, ",".join(test.group)))
            self._judged[id(sweep)] = len(sweep.tests)
            if sweep.stopped and id(sweep) not in self._stopped:
                self._stopped.add(id(sweep))
                self.events.append((t_s, "sweep-stopped", sweep.stopped))
            if sweep.job_id is not None and sweep.job_id not in self._started:
                self._started.add(sweep.job_id)
                self.events.append((t_s, "sweep-test", ",".join(sweep.search.group or [])))


def _submit(store: Store, job_id: str, gpus: int, t_s: float, f: dict[str, object]) -> None:
    parent, index, limit = f.get("array", (None, None, None))  # type: ignore[misc]
    add_job(
        store,
        ["railyard-sim"],
        id=job_id,
        number=int(job_id.split("_")[0]),
        queue="q",
        flavor=FLAVOR,
        workers=max(1, gpus // 4),  # whole 4-GPU nodes past one node, as the simulator splits
        gpus_per_worker=min(gpus, 4),
        submit_t_s=t_s,
        updated_t_s=t_s,
        checkpoint_grace_s=GRACE_S,
        priority=f.get("priority", 0),
        preemptible=f.get("preemptible", False),
        walltime_s=f.get("walltime_s"),
        max_restarts=f.get("max_restarts", 3),
        array_parent=parent,
        array_index=index,
        array_max_running=limit,
        terminal="pipes" if f.get("interactive") else "",
    )


def _set_node(store: Store, name: str, state: NodeState) -> None:
    with store.session() as s:
        row = s.get(NodeRow, name)
        assert row is not None
        row.state = state.value


def test_simulator_and_live_loop_write_the_same_history(store: Store, tmp_path: Path) -> None:
    sim, real = simulated(ALL_RULES), live(ALL_RULES, store, tmp_path)
    assert real == sim
    kinds = {kind for _, kind, _ in sim}
    assert {"preempt", "requeue", "end:timeout", "end:node_fail", "drained"} <= kinds
    array = [(t, kind) for t, kind, job in sim if job.startswith("3_") and kind != "preempt"]
    running = 0
    for _, kind in array:  # the %1 throttle: never two tasks at once
        running += 1 if kind == "start" else -1
        assert running <= 1
    with store.session() as s:  # the rows the live history came from agree
        states = {job_id: state for job_id, state in s.execute(select(JobRow.id, JobRow.state))}
    assert (states["4"], states["5"]) == ("timeout", "node_fail")


def test_a_sweep_finds_the_slow_node_alike_in_both_drivers(store: Store, tmp_path: Path) -> None:
    sim, real = simulated(SWEEP), live(SWEEP, store, tmp_path)
    assert real == sim
    assert (100.0, "end:completed", "1") in sim  # 50 s of work at n3's half speed
    assert (100.0, "sweep-test", "n0,n1,n2,n3") in sim  # once `1` left the nodes idle
    assert (400.0, "health:draining", "n3") in sim
    assert (400.0, "drained", "n3") in sim
    assert (400.0, "start", "2") in sim  # held by the sweep until it ended
    assert [e for e in sim if e[0] >= 600] == [
        (600.0, "sweep-asked", "n0,n1,n2"),
        (600.0, "sweep-test", "n0,n1,n2"),
        (660.0, "start", "4"),  # held by the sweep until its test passed
        (660.0, "sweep-ok", "n0,n1,n2"),
        (680.0, "end:completed", "4"),
    ]
    with store.session() as s:  # the reason live wrote
        row = s.get(NodeRow, "n3")
        assert row is not None
        assert row.reason == "health: allreduce-across 50 GB/s < 0.8 x expected 100 GB/s"


def test_history_estimates_and_time_limits_agree(store: Store, tmp_path: Path) -> None:
    sim, real = simulated(HISTORY), live(HISTORY, store, tmp_path)
    assert real == sim
    assert (40.0, "start", "4") in sim  # backfilled on the estimate from `1`'s run
    assert (200.0, "end:timeout", "2") in sim


def test_idle_sessions_end_at_their_limit_alike_in_both_drivers(
    store: Store, tmp_path: Path
) -> None:
    sim, real = simulated(IDLE), live(IDLE, store, tmp_path)
    assert real == sim
    assert (150.0, "end:timeout", "1") in sim  # used until 50, idle limit 100
    assert (80.0, "end:completed", "2") in sim
    assert (300.0, "end:completed", "3") in sim  # a batch job has no idle limit
    with store.session() as s:
        row = s.get(JobRow, "1")
        assert row is not None
        assert (row.state, row.reason, row.active_t_s) == ("timeout", "IdleLimit", 50.0)
