"""The simulation driver: the live loop's step on a virtual clock.

Each step gathers what the virtual executor reported and hands it, with the cluster as it
is, to `sched.lifecycle.step`, the same pure step the live control plane applies; then it
applies the plan: settlements (end states, requeues), time-limit warnings and stops, the
cycle's starts, preemptions and node-down requeues, nominations, drains and usage. Steps run
on events, coalesced per timestamp (or per `coalesce_s`, like the live loop's burst
coalescing), when a time limit falls due, and at `cycle_interval_s` while jobs wait.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from railyard.blueprint.pools import pool_of
from railyard.exec.exits import exit_of
from railyard.exec.protocol import LaunchSpec
from railyard.sched import (
    CycleCache,
    Job,
    Level,
    Node,
    NodeState,
    Queue,
    RunningJob,
    Start,
    StartReason,
    StopCause,
    Usage,
)
from railyard.sched.applyplan import apply_plan
from railyard.sched.dependencies import met_now
from railyard.sched.health import HealthInput, NodeChange, with_sweep
from railyard.sched.history import RuntimeHistory
from railyard.sched.lifecycle import (
    EndState,
    ExitKind,
    Settlement,
    StepInput,
    StepPlan,
    history_run,
    past_deadline,
    time_limits,
)
from railyard.sched.lifecycle import step as lifecycle_step
from railyard.sched.stops import Stop
from railyard.sim.across import AcrossSweeps, world_tests
from railyard.sim.cluster import flat_queues
from railyard.sim.config import NodeEvent, SimConfig
from railyard.sim.engine import Engine, Event, EventKind
from railyard.sim.executor import VirtualExecutor
from railyard.sim.failures import FailureProcess
from railyard.sim.health import HealthState
from railyard.sim.records import JobRecord, RunLog
from railyard.sim.workload import Workload, scheduler_job

Progress = Callable[[float], None]
"""Called now and then with the fraction of jobs finished (0..1)."""

_SIM_COMMAND = ("railyard-sim",)
_SIM_DIR = Path("/nonexistent/railyard-sim")  # LaunchSpec needs paths; nothing is written


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
        system = world_tests(cfg.health) if cfg.health is not None else None
        self.executor = VirtualExecutor(self.engine, cfg.checkpoint, system)
        self.cache = CycleCache()
        self.nodes = {n.name: n for n in sim.nodes}
        self.node_tuple = tuple(sim.nodes)
        self.queues = tuple(sim.queues)
        self.queue_map = {q.name: q for q in sim.queues}
        self.weights = {q.name: q.weight for q in sim.queues if q.parent is not None}
        self.usage = Usage()
        self.last_accrual_t_s = 0.0
        self.step_t_s = 0.0  # the time of the step whose plan is being applied
        self.pending: dict[str, Job] = {}
        self.running: dict[str, RunningJob] = {}
        self.nominated: set[str] = set()
        self.records: dict[str, JobRecord] = {}
        self.jobs: dict[str, Job] = {}
        self.history = RuntimeHistory.of(cfg.scheduler)
        self.busy_gpus = 0
        self.timeline: list[tuple[float, int, int, int]] = []
        self.queue_gpu_s: dict[str, float] = {}
        self.cycle_at: float | None = None
        self.tick_at: float | None = None
        self.deadline_at: float | None = None
        self.cycles = 0
        self.changed = True  # anything happened since the last cycle
        self.node_failures = 0
        self.done = 0
        self.down_gpus = 0
        self.repair_s: dict[tuple[str, float], float] = {}
        self.admin: dict[str, NodeEvent] = {}
        self.health = HealthState(cfg.health) if cfg.health is not None else None
        self.across = AcrossSweeps(self.health, self.executor) if self.health else None
        self.check_due_at: float | None = None
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
        by_pool: dict[str | None, str] = {}  # each pool's largest flavor: its jobs run there
        for f in sorted(flavors, key=lambda f: (flavors[f], f)):
            by_pool[pool_of(f)] = f
        self.total_gpus = sum(flavors.values())
        leaves = {q.name for q in self.queues if q.parent is not None} or {
            q.name for q in self.queues
        }
        for t in sim.workload.jobs:
            if t.id in self.records:
                raise ValueError(f"job id {t.id!r} appears twice in workload {sim.workload.name}")
            flavor = by_pool.get(t.pool, "none")
            per_node = node_gpus.get(flavor, 1)
            workers, gpw = (1, t.gpus) if t.gpus <= per_node else (-(-t.gpus // per_node), per_node)
            rec = self.records[t.id] = JobRecord(t, workers * gpw)
            if workers * gpw > flavors.get(flavor, 0) or t.queue not in leaves:
                rec.state = "rejected"  # can never run here: too big, or no such queue
                self.done += 1
                continue
            self.jobs[t.id] = scheduler_job(t, flavor, workers, gpw, self.cfg.grace_s)
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
        for k, ev in enumerate(self.cfg.node_events):
            if ev.node not in self.nodes:
                raise ValueError(f"node event for unknown node {ev.node!r}")
            self.admin[str(k)] = ev
            self.engine.schedule(ev.t_s, Event(EventKind.ADMIN, job_id=str(k), node=ev.node))
        for k, d in enumerate(self.cfg.health.degradations if self.cfg.health else ()):
            if d.node not in self.nodes:
                raise ValueError(f"degradation of unknown node {d.node!r}")
            self.engine.schedule(d.t_s, Event(EventKind.DEGRADE, job_id=str(k), node=d.node))
        for k, sweep in enumerate(self.cfg.health.sweeps if self.cfg.health else ()):
            if unknown := set(sweep.nodes) - set(self.nodes):
                raise ValueError(f"sweep over unknown nodes {sorted(unknown)}")
            self.engine.schedule(sweep.t_s, Event(EventKind.SWEEP, job_id=str(k)))

    # -- the loop ----------------------------------------------------------------------------

    def execute(self) -> RunLog:
        self.engine.run(self._handle)
        self._report_progress(force=True)
        ex = self.executor
        jobs = {jid: w for jid, w in ex.work.items() if jid in self.records}  # no system job
        ended = [w for jid, w in jobs.items() if self.records[jid].end_t_s is not None]
        useful = sum(w.gpus * w.total_s for w in ended)
        for jid, w in jobs.items():
            self.records[jid].lost_gpu_s = w.lost_gpu_s
        return RunLog(
            total_gpus=self.total_gpus,
            records=self.records,
            timeline=self.timeline,
            queue_gpu_s=self.queue_gpu_s,
            weights=self.weights,
            useful_gpu_s=useful,
            allocated_gpu_s=sum(w.allocated_gpu_s for w in jobs.values()),
            lost_gpu_s=sum(w.lost_gpu_s for w in jobs.values()),
            checkpoints=sum(w.checkpoints for w in jobs.values()),
            node_failures=self.node_failures,
            cycles=self.cycles,
            events=self.engine.events_processed,
            end_t_s=self.engine.now_t_s,
            event_log=self.log,
            health=self._health_summary(),
        )

    def _health_summary(self) -> dict[str, float | None] | None:
        h = self.health
        if h is None:
            return None
        out = h.summary({n.name: n.gpus for n in self.node_tuple},
                        sum(w.slowed_gpu_s for w in self.executor.work.values()))  # fmt: skip
        if self.across is not None and h.world.sweeps:
            c = self.across.counts
            out |= {f"sweeps_{k}": float(v) for k, v in vars(c).items()}
            out["sweep_gpu_s"] = self.across.gpu_s()
        return out

    def _note(self, t_s: float, kind: EventKind, what: str) -> None:
        if self.cfg.record_events:
            self.log.append((t_s, kind.name.lower(), what))

    def _handle(self, t_s: float, ev: Event) -> None:
        kind = ev.kind
        if kind is EventKind.CYCLE:
            self.cycle_at = None
            self._step(t_s, scheduled=True)
            return
        if kind is EventKind.DEADLINE:
            if self.deadline_at == t_s:
                self.deadline_at = None
                due = time_limits(self.running.values(), self.queue_map, t_s)
                dated = [j for j in self.pending.values() if j.deadline_t_s is not None]
                expired, _, expire_t_s = past_deadline(dated, self.queue_map, t_s)
                if due.warn or due.stop or due.idle or expired:  # it may have ended before
                    self.changed = True
                    self._want_cycle(t_s)  # coalesced like any other event
                else:
                    self._want_deadline(min(due.next_t_s, expire_t_s))
            return
        if kind is not EventKind.TICK and kind is not EventKind.CHECKPOINT:
            self.changed = True
        if kind in (EventKind.SUBMIT, EventKind.FAILURE, EventKind.REPAIR, EventKind.DEGRADE):
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
        elif kind is EventKind.ADMIN:
            self._admin(t_s, self.admin[ev.job_id])
        elif kind is EventKind.SWEEP:
            self._sweep_asked(t_s, int(ev.job_id))
        elif kind is EventKind.DEGRADE:
            self._degrade(t_s, ev)
        elif kind is EventKind.CHECKED:
            self._checked(t_s, ev.node)
        elif kind is EventKind.CHECK_DUE:
            if self.check_due_at == t_s:
                self.check_due_at = None
                self._want_cycle(t_s)
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

    def _want_deadline(self, t_s: float) -> None:
        if math.isfinite(t_s) and (self.deadline_at is None or t_s < self.deadline_at):
            self.deadline_at = t_s
            self.engine.schedule(t_s, Event(EventKind.DEADLINE))

    # -- one step, as the live loop does it -------------------------------------------------------

    def _step(self, now: float, *, scheduled: bool) -> None:
        idle = not scheduled and not self.changed and self.cfg.skip_idle_ticks
        reports = self.executor.poll()
        if self.across is not None:
            reports = self.across.take(reports)
            if self.across.ended:
                self._sweep_ended(now)
        if reports or (self.pending and not idle) or (scheduled and self.changed):
            self.changed = False
            exits = [exit_of(r, self.executor.work[r.job_id].exit_t_s) for r in reports]
            plan = lifecycle_step(
                StepInput(
                    self.node_tuple,
                    self.queues,
                    tuple(self.pending.values()),
                    tuple(self.running.values()),
                    exits,
                    now,
                    self.usage,
                    self.last_accrual_t_s,
                    self.history.predictions_at(now),
                    self.cfg.keep_submit_time,
                    no_deadline_before_t_s=self.deadline_at,
                    health=self._health_input(now),
                ),
                self.cfg.scheduler,
                self.cache,
            )
            self.cycles += 1
            self._apply(now, plan)
            if self.executor.has_reports():  # cancels report at once: settle them next
                self.changed = True
                self._want_cycle(now)
        self.timeline.append((now, self.busy_gpus, len(self.pending), self.down_gpus))
        if not self.cfg.skip_idle_ticks:
            self._want_tick(now)
        self._report_progress()

    def _apply(self, now: float, plan: StepPlan) -> None:
        self.step_t_s = now
        apply_plan(plan, self)  # the live loop's order (`sched.applyplan`): settle .. accrue
        self.nominated = set(plan.result.nominated)
        self._want_deadline(plan.next_deadline_t_s)
        if self.health is not None:
            for name in plan.checks:
                self.health.start(name)
                check_s = self.health.world.policy.check_s
                self.engine.schedule(now + check_s, Event(EventKind.CHECKED, node=name))
            self._want_check(plan.next_check_t_s)
        group = plan.group_check
        if group and self.across is not None and self.across.start(group, self.nodes, now):
            self._note(now, EventKind.SWEEP, f"test {','.join(group)}")

    # -- the plan's changes (`sched.applyplan.PlanTarget`), at ``step_t_s`` -----------------------

    def expire(self, job_id: str) -> None:  # could no longer end by its --deadline: never runs
        self._end_pending(job_id, EndState.DEADLINE)

    def abandon(self, job_id: str) -> None:  # --kill-on-invalid-dep: never runs, CANCELLED
        self._end_pending(job_id, EndState.CANCELLED)

    def _end_pending(self, job_id: str, state: EndState) -> None:
        self.pending.pop(job_id)
        self.nominated.discard(job_id)
        rec = self.records[job_id]
        rec.state, rec.end_t_s = state.value, self.step_t_s
        self.done += 1
        self._note(self.step_t_s, EventKind.END, job_id)

    def satisfy(self, job_id: str) -> None:  # a met dependency is cleared; it waits from now
        cleared, _ = met_now([self.pending[job_id]], self.step_t_s)
        self.pending[job_id] = cleared[0]

    def warn(self, job_id: str) -> None:
        self.running[job_id] = replace(self.running[job_id], warned=True)

    def stop(self, stop: Stop) -> None:
        self.running[stop.job_id] = stop.applied(self.running[stop.job_id])
        if stop.handshake:
            self.records[stop.job_id].preemptions += 1
            self._note(self.step_t_s, EventKind.PREEMPT_SIGNAL, stop.job_id)
            self.executor.request_checkpoint_stop(stop.job_id, stop.grace_s)
        else:
            self.executor.cancel(stop.job_id)

    def nominate(self, job_id: str, nominated: bool) -> None:
        if job_id in self.pending:
            self.pending[job_id] = replace(self.pending[job_id], nominated=nominated)

    def drain(self, node: str) -> None:
        self._set_node(replace(self.nodes[node], state=NodeState.DRAINED))
        self._note(self.step_t_s, EventKind.ADMIN, f"{node} drained")

    def accrue(self, usage: Usage) -> None:
        self.usage, self.last_accrual_t_s = usage, self.step_t_s

    def start(self, starts: Sequence[Start]) -> set[str]:
        for one in starts:
            self._start(self.step_t_s, one)
        return {one.job_id for one in starts}

    def _start(self, now: float, start: Start) -> None:
        job_id, placement = start.job_id, start.placement
        job = self.pending.pop(job_id)
        backfilled = start.reason is StartReason.BACKFILL
        rec = self.records[job_id]
        active_t_s = None  # a session's user works in it for its trace's active_s
        if job.interactive:
            active_t_s = now + (rec.trace.active_s if rec.trace.active_s is not None else math.inf)
        pull_s = self._pull(job.image, placement, rec) if job.image is not None else 0.0
        self.running[job_id] = RunningJob(
            replace(job, nominated=False), placement, now, backfilled=backfilled,
            active_t_s=active_t_s, run_t_s=now + pull_s if job.image is not None else None,
        )  # fmt: skip
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
        self.executor.start(spec, setup_s=pull_s)

    def _pull(self, image: str, placement: Mapping[str, object], rec: JobRecord) -> float:
        """Seconds this start waits for `image` on the nodes that lack it; they hold it
        from now on (so the scheduler prefers them for its next job)."""
        lacking = [self.nodes[n] for n in placement if image not in self.nodes[n].images]
        if not lacking:
            return 0.0
        for node in lacking:
            self.nodes[node.name] = replace(node, images=node.images | {image})
        self.node_tuple = tuple(self.nodes[n.name] for n in self.node_tuple)  # once per start
        pull_s = self.cfg.images.pull_s(image, len(lacking)) if self.cfg.images else 0.0
        rec.cold_starts += 1
        rec.pull_s += pull_s
        what = f"{rec.trace.id} pulls {image} on {len(lacking)} node(s) for {pull_s:.0f} s"
        self._note(self.engine.now_t_s, EventKind.START, what)
        return pull_s

    def settle(self, s: Settlement) -> None:
        now, job_id, end, requeued = self.step_t_s, s.job_id, s.end, s.requeued
        r = self.running.pop(job_id)
        rec = self.records[job_id]
        self.busy_gpus -= r.gpus
        exit_t_s = self.executor.work[job_id].exit_t_s
        end_t_s = now if exit_t_s is None else exit_t_s
        q = r.job.queue
        self.queue_gpu_s[q] = self.queue_gpu_s.get(q, 0.0) + r.gpus * (end_t_s - r.start_t_s)
        if requeued is not None:
            node_fail = s.exit is not None and s.exit.kind is ExitKind.NODE_FAIL
            rec.failures += node_fail or r.stop_cause is StopCause.NODE_DOWN
            rec.restarts += 1
            rec.state = "pending"
            self._note(now, EventKind.REQUEUE, job_id)
            self.pending[job_id] = requeued
            return
        assert end is not None
        rec.idle_stopped = r.stop_cause is StopCause.IDLE_LIMIT
        rec.end_t_s = end_t_s
        rec.state = end.value
        self.done += 1
        self._note(now, EventKind.END, job_id)
        run = history_run(s, r, now)
        if run is not None:
            self.history.record(*run)

    # -- the world: failures, repairs, admins -----------------------------------------------------

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

    def _admin(self, t_s: float, ev: NodeEvent) -> None:
        node = self.nodes[ev.node]
        if node.state is NodeState.DOWN:
            return
        state = NodeState.DRAINING if ev.action == "drain" else NodeState.READY
        self._set_node(replace(node, state=state))
        if self.health is not None:
            self.health.reasons[ev.node] = (ev.reason or "drained") if ev.action == "drain" else ""
        self._note(t_s, EventKind.ADMIN, f"{ev.node} {ev.action}")
        self._want_cycle(t_s)

    # -- health: slow nodes, checks, repairs (see sim/health.py) ---------------------------------

    def _want_check(self, t_s: float) -> None:
        if math.isfinite(t_s) and (self.check_due_at is None or t_s < self.check_due_at):
            self.check_due_at = t_s
            self.engine.schedule(t_s, Event(EventKind.CHECK_DUE))

    def _degrade(self, t_s: float, ev: Event) -> None:
        assert self.health is not None
        assert self.cfg.health is not None
        if ev.job_id:  # a node turns slow
            d = self.cfg.health.degradations[int(ev.job_id)]
            self.health.degrade(d.node, d.speed, t_s)
            self.executor.speed[d.node] = d.speed
            return
        self.executor.speed.pop(ev.node, None)  # repaired
        change = self.health.repaired(ev.node, self.nodes[ev.node].state)
        if change is not None:
            self._want_cycle(t_s)

    def _checked(self, t_s: float, name: str) -> None:
        assert self.health is not None
        change = self.health.finish(name, self.nodes[name].state, t_s)
        self._note(
            t_s, EventKind.CHECKED, f"{name} {'fail' if name in self.health.speed else 'pass'}"
        )
        if change is not None:
            self._health_change(t_s, change)
        self._want_cycle(t_s)

    def _health_change(self, t_s: float, change: NodeChange) -> None:
        """The health rule's change to a node; a slow node it takes out goes to repair."""
        assert self.health is not None
        node = self.nodes[change.node]
        if change.state is not node.state:
            self._set_state(node, change.state)
            if change.node in self.health.speed and change.state is not NodeState.READY:
                repair_t_s = t_s + self.health.world.repair_s
                self.engine.schedule(repair_t_s, Event(EventKind.DEGRADE, node=change.node))

    def _health_input(self, now: float) -> HealthInput | None:
        """Checks, and a sweep's hold and next group, as live (`sched.health.with_sweep`)."""
        if self.health is None or self.across is None:
            return None
        why = self.across.watch(self.nodes, now)
        if why is not None:
            self._note(now, EventKind.SWEEP, f"stopped: {why}")
        return with_sweep(self.health.input(), self.across.held(), self.across.wanted())

    def _sweep_asked(self, t_s: float, k: int) -> None:
        assert self.across is not None
        assert self.cfg.health is not None
        covered = self.across.request(self.node_tuple, self.cfg.health.sweeps[k].nodes)
        self._note(t_s, EventKind.SWEEP, f"asked {','.join(covered) or '(refused)'}")
        self._want_cycle(t_s)

    def _sweep_ended(self, now: float) -> None:
        """A sweep's test ended: its verdict; when the search is over, the health rule's
        changes to its nodes (a slow node drained is handed to repair, as a check's is)."""
        assert self.across is not None
        tests, changes = self.across.finish(self.nodes, now)
        for test in tests:
            verdict = "ok" if test.ok else "slow"
            self._note(now, EventKind.SWEEP, f"{verdict} {','.join(test.group)}")
        for change in changes:
            self._note(now, EventKind.SWEEP, f"{change.node} {change.state.value}")
            self._health_change(now, change)
        self.changed = True

    def _set_state(self, node: Node, state: NodeState) -> None:
        if (node.state is NodeState.DOWN) != (state is NodeState.DOWN):
            self.down_gpus += node.gpus if state is NodeState.DOWN else -node.gpus
        self._set_node(replace(node, state=state))

    def _set_node(self, node: Node) -> None:
        self.nodes[node.name] = node
        self.node_tuple = tuple(self.nodes[n.name] for n in self.node_tuple)

    def _report_progress(self, *, force: bool = False) -> None:
        if self.progress is not None and (force or self.engine.events_processed % 2048 == 0):
            self.progress(self.done / max(1, len(self.records)))
        if self.done >= len(self.records) and not self.running:
            self.engine.stop()  # only failure and repair events are left


__all__ = ["JobRecord", "NodeEvent", "RunLog", "SimConfig", "Simulation"]
