"""The simulation driver: the live service's step on a virtual clock.

Mirrors `control.loop.Loop.step`: (1) settle the executor's exits (completed, requeued,
failed), (2) snapshot and run `sched.cycle`, (3) act on the decisions through the executor
(starts, checkpoint-stop handshakes, requeues of jobs on dead nodes), (4) accrue fair-share
usage with `sched.accrue_usage`. Steps run on events, coalesced per timestamp (or per
`coalesce_s`, like the live loop's burst coalescing), and at `cycle_interval_s` while jobs wait.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from railyard.exec.protocol import ExitReport, LaunchSpec, Outcome
from railyard.sched import (
    ClusterState,
    Job,
    Level,
    Node,
    NodeState,
    Placement,
    Queue,
    RunningJob,
    SchedulerConfig,
    Usage,
    accrue_usage,
    cycle,
    requeue_after_stop,
)
from railyard.sim.checkpoints import CheckpointPolicy
from railyard.sim.cluster import flat_queues
from railyard.sim.engine import Engine, Event, EventKind
from railyard.sim.executor import VirtualExecutor
from railyard.sim.failures import FailureModel, FailureProcess
from railyard.sim.workload import TraceJob, Workload

Progress = Callable[[float], None]
"""Called now and then with the fraction of jobs finished (0..1)."""

_SIM_COMMAND = ("railyard-sim",)
_SIM_DIR = Path("/nonexistent/railyard-sim")  # LaunchSpec needs paths; nothing is written


@dataclass(frozen=True)
class SimConfig:
    """Policies, world model and loop timing of one run. Everything random follows `seed`."""

    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    checkpoint: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    failures: FailureModel | None = None
    cycle_interval_s: float = 60.0
    coalesce_s: float = 0.0
    grace_s: float = 120.0
    keep_submit_time: bool = True
    seed: int = 0
    record_events: bool = False
    skip_idle_ticks: bool = True

    def __post_init__(self) -> None:
        if self.cycle_interval_s <= 0 or self.coalesce_s < 0 or self.grace_s < 0:
            raise ValueError("cycle_interval_s must be > 0; coalesce_s and grace_s >= 0")


@dataclass(slots=True)
class JobRecord:
    """What happened to one job; metrics are computed from these."""

    trace: TraceJob
    gpus: int
    state: str = (
        "waiting"  # waiting | pending | running | completed | failed | cancelled | rejected
    )
    first_start_t_s: float | None = None
    end_t_s: float | None = None
    restarts: int = 0
    preemptions: int = 0
    failures: int = 0
    multi_node_starts: int = 0
    one_leaf_group_starts: int = 0
    one_su_starts: int = 0


@dataclass
class RunLog:
    """Raw output of a run: job records, the timeline and counters. `metrics.summarize` reads it."""

    total_gpus: int
    records: dict[str, JobRecord]
    timeline: list[tuple[float, int, int, int]]  # (t_s, busy GPUs, pending jobs, down GPUs)
    queue_gpu_s: dict[str, float]
    weights: dict[str, float]
    useful_gpu_s: float
    allocated_gpu_s: float
    lost_gpu_s: float
    checkpoints: int
    node_failures: int
    cycles: int
    events: int
    end_t_s: float
    event_log: list[tuple[float, str, str]] = field(default_factory=list)


class Simulation:
    """One run of a workload on a cluster under one config. Construction does nothing else."""

    def __init__(
        self,
        nodes: Sequence[Node],
        workload: Workload,
        config: SimConfig,
        queues: Sequence[Queue] | None = None,
    ) -> None:
        self.nodes = list(nodes)
        self.workload = workload
        self.config = config
        self.queues = list(queues) if queues is not None else flat_queues(workload.queues)

    def run(self, progress: Progress | None = None) -> RunLog:
        return _Run(self, progress).execute()


class _Run:
    """The mutable state of one run (kept apart so a `Simulation` can run again)."""

    def __init__(self, sim: Simulation, progress: Progress | None) -> None:
        cfg = sim.config
        self.cfg = cfg
        self.progress = progress
        self.engine = Engine()
        self.executor = VirtualExecutor(self.engine, cfg.checkpoint)
        self.nodes = {n.name: n for n in sim.nodes}
        self.node_tuple = tuple(sim.nodes)
        self.queues = tuple(sim.queues)
        self.weights = {q.name: q.weight for q in sim.queues if q.parent is not None}
        self.usage = Usage()
        self.last_accrual_t_s = 0.0
        self.pending: dict[str, Job] = {}
        self.running: dict[str, RunningJob] = {}
        self.records: dict[str, JobRecord] = {}
        self.jobs: dict[str, Job] = {}
        self.busy_gpus = 0
        self.timeline: list[tuple[float, int, int, int]] = []
        self.queue_gpu_s: dict[str, float] = {}
        self.cycle_at: float | None = None
        self.tick_at: float | None = None
        self.cycles = 0
        self.changed = True  # anything happened since the last cycle
        self.node_failures = 0
        self.done = 0
        self.down_gpus = 0
        self.repair_s: dict[tuple[str, float], float] = {}
        self.log: list[tuple[float, str, str]] = []
        seed_nodes = [(n.name, n.gpus) for n in sim.nodes]
        self.failures = (
            FailureProcess(cfg.failures, seed_nodes, cfg.seed) if cfg.failures is not None else None
        )
        self._prepare(sim)

    # -- setup -------------------------------------------------------------------------------

    def _prepare(self, sim: Simulation) -> None:
        flavors: dict[str, int] = {}
        node_gpus: dict[str, int] = {}
        for n in sim.nodes:
            flavors[n.flavor] = flavors.get(n.flavor, 0) + n.gpus
            node_gpus[n.flavor] = max(node_gpus.get(n.flavor, 0), n.gpus)
        flavor = max(flavors, key=lambda f: (flavors[f], f)) if flavors else "none"
        per_node = node_gpus.get(flavor, 1)
        self.total_gpus = sum(flavors.values())
        leaves = {q.name for q in self.queues if q.parent is not None} or {
            q.name for q in self.queues
        }
        for t in sim.workload.jobs:
            if t.id in self.records:
                raise ValueError(f"job id {t.id!r} appears twice in workload {sim.workload.name}")
            workers, gpw = (1, t.gpus) if t.gpus <= per_node else (-(-t.gpus // per_node), per_node)
            rec = self.records[t.id] = JobRecord(t, workers * gpw)
            if workers * gpw > flavors.get(flavor, 0) or t.queue not in leaves:
                rec.state = "rejected"  # can never run here: too big, or no such queue
                self.done += 1
                continue
            self.jobs[t.id] = Job(
                id=t.id,
                queue=t.queue,
                flavor=flavor,
                workers=workers,
                gpus_per_worker=gpw,
                user=t.user,
                priority=t.priority,
                preemptible=t.preemptible,
                walltime_s=t.walltime_s,
                submit_t_s=t.submit_s,
                checkpoint_grace_s=self.cfg.grace_s,
            )
            self.executor.register(t.id, t.runtime_s, workers * gpw, t.state)
            self.engine.schedule(t.submit_s, Event(EventKind.SUBMIT, t.id))
        if self.failures is not None:
            model = self.failures.model
            for name in sorted(self.nodes):
                t_s = self.failures.next_failure_t_s(name, 0.0)
                if math.isfinite(t_s):
                    self.engine.schedule(t_s, Event(EventKind.FAILURE, node=name))
            for inj in model.injected:
                self.repair_s[inj.node, inj.t_s] = inj.repair_s
                self.engine.schedule(inj.t_s, Event(EventKind.FAILURE, node=inj.node, attempt=1))

    # -- the loop ----------------------------------------------------------------------------

    def execute(self) -> RunLog:
        self.engine.run(self._handle)
        self._report_progress(force=True)
        ex = self.executor
        useful = sum(
            w.gpus * w.total_s
            for jid, w in ex.work.items()
            if self.records[jid].end_t_s is not None
        )
        return RunLog(
            total_gpus=self.total_gpus,
            records=self.records,
            timeline=self.timeline,
            queue_gpu_s=self.queue_gpu_s,
            weights=self.weights,
            useful_gpu_s=useful,
            allocated_gpu_s=sum(w.allocated_gpu_s for w in ex.work.values()),
            lost_gpu_s=sum(w.lost_gpu_s for w in ex.work.values()),
            checkpoints=sum(w.checkpoints for w in ex.work.values()),
            node_failures=self.node_failures,
            cycles=self.cycles,
            events=self.engine.events_processed,
            end_t_s=self.engine.now_t_s,
            event_log=self.log,
        )

    def _note(self, t_s: float, kind: EventKind, what: str) -> None:
        if self.cfg.record_events:
            self.log.append((t_s, kind.name.lower(), what))

    def _handle(self, t_s: float, ev: Event) -> None:
        kind = ev.kind
        if kind is EventKind.CYCLE:
            self.cycle_at = None
            self._step(t_s, scheduled=True)
            return
        if kind is not EventKind.TICK and kind is not EventKind.CHECKPOINT:
            self.changed = True
        if kind in (EventKind.SUBMIT, EventKind.FAILURE, EventKind.REPAIR):
            self._note(t_s, kind, ev.job_id or ev.node)
        if kind is EventKind.SUBMIT:
            self.pending[ev.job_id] = self.jobs[ev.job_id]
            self.records[ev.job_id].state = "pending"
            self._want_cycle(t_s)
        elif kind is EventKind.TICK:
            self.tick_at = None
            self._step(t_s, scheduled=False)
        elif kind is EventKind.FAILURE:
            self._node_down(t_s, ev)
        elif kind is EventKind.REPAIR:
            self._node_up(t_s, ev.node)
        elif self.executor.on_event(ev):  # False: an event of an attempt that is over
            self._note(t_s, kind, ev.job_id)
            if kind is EventKind.CHECKPOINT:
                r = self.running.get(ev.job_id)
                if r is not None:
                    self.running[ev.job_id] = replace(r, last_checkpoint_t_s=t_s)
            else:
                self._want_cycle(t_s)

    def _want_cycle(self, t_s: float) -> None:
        if self.cycle_at is None:
            self.cycle_at = t_s + self.cfg.coalesce_s
            self.engine.schedule(self.cycle_at, Event(EventKind.CYCLE))

    def _want_tick(self, t_s: float) -> None:
        if self.tick_at is None and self.pending:
            self.tick_at = t_s + self.cfg.cycle_interval_s
            self.engine.schedule(self.tick_at, Event(EventKind.TICK))

    # -- one step, as the live service does it ---------------------------------------------------

    def _step(self, now: float, *, scheduled: bool) -> None:
        idle = not scheduled and not self.changed and self.cfg.skip_idle_ticks
        reports = self.executor.poll()
        # Jobs on a failed node fail at once (the executor ends them), so no running job is
        # ever left on a down node: the cycle is needed only while jobs wait.
        run_cycle = bool(self.pending) and not idle
        if reports or run_cycle:
            # Charge the running set for the time since the last accrual: it has not changed
            # since then (starts and exits only happen in steps), so this is exact.
            self._accrue(now, tuple(self.running.values()))
        # 1. Exits first, so their GPUs are free for this cycle.
        self._settle(now, reports)
        if run_cycle:
            self.changed = False
            # 2. Snapshot and cycle.
            state = ClusterState(
                self.node_tuple,
                self.queues,
                tuple(self.pending.values()),
                tuple(self.running.values()),
                self.usage,
            )
            result = cycle(state, now, self.cfg.scheduler)
            self.cycles += 1
            # 3. Act on the decisions.
            for p in result.preemptions:
                r = self.running[p.job_id]
                self.running[p.job_id] = replace(r, preempt_for=p.for_job_id)
                self.records[p.job_id].preemptions += 1
                self._note(now, EventKind.PREEMPT_SIGNAL, p.job_id)
                self.executor.request_checkpoint_stop(p.job_id, p.grace_s)
            for rq in result.requeues:
                r = self.running[rq.job_id]
                self.running[rq.job_id] = replace(r, preempt_for=rq.reason)
                self.executor.cancel(rq.job_id)
            for s in result.starts:
                self._start(now, s.job_id, s.placement)
            if self.executor.has_reports():  # cancels report at once: settle them next
                self.changed = True
                self._want_cycle(now)
        self.timeline.append((now, self.busy_gpus, len(self.pending), self.down_gpus))
        if not self.cfg.skip_idle_ticks:
            self._want_tick(now)
        self._report_progress()

    def _accrue(self, now: float, running: Sequence[RunningJob]) -> None:
        dt_s = now - self.last_accrual_t_s
        if dt_s > 0:
            half_life_s = self.cfg.scheduler.fairshare_half_life_s
            self.usage = accrue_usage(self.usage, running, self.queues, dt_s, half_life_s)
            self.last_accrual_t_s = now

    def _start(self, now: float, job_id: str, placement: Placement) -> None:
        job = self.pending.pop(job_id)
        self.running[job_id] = RunningJob(job, placement, now)
        rec = self.records[job_id]
        rec.state = "running"
        if rec.first_start_t_s is None:
            rec.first_start_t_s = now
        if len(placement) > 1:
            rec.multi_node_starts += 1
            nodes = [self.nodes[n] for n in placement]
            rec.one_leaf_group_starts += len({n.group(Level.LEAF_GROUP) for n in nodes}) == 1
            rec.one_su_starts += len({n.group(Level.SCALABLE_UNIT) for n in nodes}) == 1
        self.busy_gpus += job.gpus
        self._note(now, EventKind.START, job_id)
        spec = LaunchSpec(
            job_id=job_id,
            command=_SIM_COMMAND,
            placement=placement,
            gpus_per_worker=job.gpus_per_worker,
            workers=job.workers,
            restart_count=job.restart_count,
            log_dir=_SIM_DIR,
            checkpoint_dir=_SIM_DIR,
        )
        self.executor.start(spec)

    def _settle(self, now: float, reports: list[ExitReport]) -> None:
        """Exits become final states or requeues, with the live service's rules."""
        for rep in reports:
            r = self.running.pop(rep.job_id, None)
            if r is None or r.job.restart_count != rep.restart_count:
                continue
            rec = self.records[rep.job_id]
            self.busy_gpus -= r.gpus
            exit_t_s = self.executor.work[rep.job_id].exit_t_s
            end_t_s = now if exit_t_s is None else exit_t_s
            q = r.job.queue
            self.queue_gpu_s[q] = self.queue_gpu_s.get(q, 0.0) + r.gpus * (end_t_s - r.start_t_s)
            requeue = rep.outcome is not Outcome.COMPLETED and (
                r.preempt_for is not None or rep.signal == "NODE_FAIL"
            )
            if requeue:
                rec.failures += rep.signal == "NODE_FAIL" or r.preempt_for == "NodeDown"
                rec.restarts += 1
                rec.state = "pending"
                self._note(now, EventKind.REQUEUE, rep.job_id)
                self.pending[rep.job_id] = requeue_after_stop(
                    r, keep_submit_time=self.cfg.keep_submit_time
                )
                continue
            rec.end_t_s = end_t_s
            rec.state = {
                Outcome.COMPLETED: "completed",
                Outcome.FAILED: "failed",
            }.get(rep.outcome, "cancelled")
            self.done += 1

    # -- failures ------------------------------------------------------------------------------

    def _node_down(self, t_s: float, ev: Event) -> None:
        node = self.nodes[ev.node]
        if node.state is NodeState.DOWN:
            return
        self._set_node(replace(node, state=NodeState.DOWN))
        self.down_gpus += node.gpus
        self.node_failures += 1
        self.executor.fail_node(ev.node)
        if ev.attempt == 1:
            repair_s = self.repair_s.get((ev.node, t_s), 0.0)
        else:
            assert self.failures is not None
            repair_s = self.failures.repair_s()
        self.engine.schedule(t_s + repair_s, Event(EventKind.REPAIR, node=ev.node))
        self._want_cycle(t_s)

    def _node_up(self, t_s: float, name: str) -> None:
        node = self.nodes[name]
        self._set_node(replace(node, state=NodeState.READY))
        self.down_gpus -= node.gpus
        if self.failures is not None and self.done < len(self.records):
            nxt = self.failures.next_failure_t_s(name, t_s)
            if math.isfinite(nxt):
                self.engine.schedule(nxt, Event(EventKind.FAILURE, node=name))
        self._want_cycle(t_s)

    def _set_node(self, node: Node) -> None:
        self.nodes[node.name] = node
        self.node_tuple = tuple(self.nodes[n.name] for n in self.node_tuple)

    def _report_progress(self, *, force: bool = False) -> None:
        if self.progress is not None and (force or self.engine.events_processed % 2048 == 0):
            self.progress(self.done / max(1, len(self.records)))
        if self.done >= len(self.records) and not self.running:
            self.engine.stop()  # only failure and repair events are left
