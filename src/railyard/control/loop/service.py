"""The scheduler loop: the lifecycle and the cycle on the wall clock, acting through an
executor.

One step, in order:

1. Collect exits from the executor (and those adoption found after a restart).
2. Read the store into a `StepInput` (`world.py`) and ask `sched.lifecycle.step` for the plan:
   settlements, time-limit warnings and stops, the cycle's decisions, drains, usage. The
   simulator applies the very same step on its virtual clock.
3. Write the whole plan in one transaction, every state change a compare-and-set
   (`apply.py`), and commit.
4. Act on what was written: stop, warn, ask victims to checkpoint and stop, cancel jobs on
   down nodes; queue the starts and launch from that queue for at most ``launch_budget_s``
   (`control.starts`), then record each launch's handle and its own start time (RUNNING).
   What is left stays STARTING for the next step, which comes at once: a burst of starts is
   launched in slices with the cancels and exits in between settled.

The loop isolates failure: an exception while handling one job (converting its row,
building its launch spec, launching it, settling its exit) holds that job (or, for an exit,
ends it) with the reason ``SchedulerError: ...``, and the step goes on for everyone else;
only a failure of the step as a whole (the store) fails the step and /healthz.

Because the decision is durable before the act, a restart reconciles instead of guessing
(:meth:`Loop.reconcile`): RUNNING and stopping jobs are adopted by pid and start time, exits
that happened while we were away are read from the ranks' exit files, and STARTING jobs are
queued to be started again by the steps (the executor's start is idempotent per attempt), so
recovery does no work that grows with what users asked before the port listens.

While the server runs, a sweep every few seconds does the same for rows stranded past their
deadline (`control.stuck`): a STARTING row whose launch or record failed is started again
(once more per attempt: the start markers make a second launch a no-op), a CANCELLING or
PREEMPTING row whose processes the executor no longer has is settled. Each launch is its own
(`control.starts`): one job's failure never strands the rest of the step.

Only the loop's thread touches the executor; the API writes rows and calls :meth:`wake`.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, object_session

from railyard.control.errors import ServiceError, is_transient
from railyard.control.loop.apply import Written, cas, write_plan, write_ready
from railyard.control.loop.healthjobs import ScheduledChecks, health_input
from railyard.control.loop.launchspec import launch_spec
from railyard.control.loop.lostshares import LostShareBook
from railyard.control.loop.starts import LAUNCH_BUDGET_S, Starter, scheduler_error
from railyard.control.loop.sweeps import AcrossChecks, Expect
from railyard.control.loop.world import Seen, WorldReader
from railyard.control.metrics.loopstats import LoopMetrics
from railyard.control.store.database import Store
from railyard.control.store.effects import record
from railyard.control.store.paths import attempts_dir
from railyard.control.store.stuck import Overdue, overdue
from railyard.control.store.tables import HOLDING_STATES, JobRow, JobState
from railyard.control.store.transitions import transition
from railyard.control.usecases.containers import queue_mount_prefixes
from railyard.control.usecases.jobsignal import signal_sent, signals_to_send
from railyard.control.usecases.loopstatus import START_STALL_S, LoopHealth
from railyard.exec.exits import exit_of
from railyard.exec.protocol import (
    Executor,
    JobHandle,
    LaunchSpec,
    NotifiesExits,
    ReportsReady,
    SaysTimeLimits,
)
from railyard.sched import CycleCache, SchedulerConfig, StopCause
from railyard.sched.health import ACROSS_ONLY, HealthInput, HealthPolicy, with_sweep
from railyard.sched.lifecycle import Exit, ExitKind, StepInput, StepPlan
from railyard.sched.lifecycle import step as lifecycle_step

log = logging.getLogger("railyard.loop")

MIN_SLEEP_S = 0.005
"""The shortest sleep between steps when something falls due: a due time just passed (the
step that acts on it is this one) must not turn the loop into a spin."""


@dataclass(frozen=True)
class LoopConfig:
    """Where job files go (``spool_dir``, default ``state_dir/jobs``), how often the loop runs
    without events, and the policies."""

    state_dir: Path
    cycle_interval_s: float = 2.0
    event_coalesce_s: float = 0.05
    exit_coalesce_s: float = 0.01  # after exits alone: a gang's ranks end within this
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    nccl_env: Mapping[str, str] = field(default_factory=dict)
    spool_dir: Path | None = None
    cluster_name: str = "railyard"
    health: HealthPolicy | None = None  # health checks the scheduler runs on idle nodes
    health_checks: tuple[str, ...] = ()  # which checks (empty: all)
    across_expect: Expect | None = None  # what an across-node test expects (`control.sweeps`)
    across_interval_s: float | None = None  # periodic across-node sweeps of idle nodes
    terminal_linger_s: float = 30.0  # an interactive job outlives a lost client this long
    sweep_interval_s: float = 5.0  # how often stranded rows are looked for (`control.stuck`)
    start_stall_s: float = START_STALL_S  # /healthz fails: no start this long while some wait
    launch_budget_s: float = LAUNCH_BUDGET_S  # one step launches this long, the rest: next step
    freeze_heap: bool = True  # see freeze_heap()
    # New pending rows one step converts; more wait for the next step (`Loop._converting`),
    # for at most `converting_steps_max` steps in a row.
    convert_max_rows: int | None = 2000
    converting_steps_max: int = 8

    @property
    def spool(self) -> Path:
        return self.spool_dir if self.spool_dir is not None else self.state_dir / "jobs"


@dataclass
class StepReport:
    """What one step did; the tests and the metrics read it."""

    started: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    finished: list[tuple[str, str]] = field(default_factory=list)  # (job id, final state)
    requeued: list[str] = field(default_factory=list)
    cycle_s: float = 0.0  # the scheduling decision alone
    step_s: float = 0.0  # the whole step: read, decide, write, act
    backlog: int = 0  # new pending rows left for the next step, which this one did not plan
    waits_s: list[float] = field(default_factory=list)  # submit to first start, per start
    checks: list[str] = field(default_factory=list)  # health checks (system jobs) started
    relaunched: list[str] = field(default_factory=list)  # stranded STARTING rows started again
    settled_stuck: list[str] = field(default_factory=list)  # stranded stops settled as ended


class Loop:
    """Drives scheduling and execution; see the module docstring for the order of a step."""

    def __init__(
        self,
        store: Store,
        executor: Executor,
        config: LoopConfig,
        *,
        clock: Callable[[], float] = time.time,
        refresh: Callable[[], None] | None = None,
    ) -> None:
        """``refresh`` runs in each step right after the executor's poll: the Ray inventory's
        sync, so a machine the poll found gone is down before the cycle places anything."""
        self.store = store
        self.refresh = refresh
        self.executor = executor
        self.config = config
        self.clock = clock
        self._wake = threading.Event()
        self._asked = False  # woken by wake() (the API), not only by exits
        self._prompt = False  # woken by wake_prompt(): someone waits at a terminal
        self.health = LoopHealth.for_interval(config.cycle_interval_s, config.start_stall_s)
        self.starter = Starter(store, executor, self.health, clock, self._launch_spec)
        self._next_sweep_t_s = clock() + config.sweep_interval_s
        self.metrics = LoopMetrics()
        self._last_accrual_t_s: float | None = None
        self._world = WorldReader(config.scheduler)
        self._converting_steps = 0  # steps in a row that only converted new rows
        self._cache = CycleCache()
        self._carried: list[Exit] = []  # exits adoption found, settled by the next step
        self.lost_shares = LostShareBook(store, executor)  # kept across restarts
        self._ready_written: set[tuple[str, int]] = set()  # (job, attempt) run_t_s written
        self.last_plan: StepPlan | None = None
        self.checks = (
            ScheduledChecks(
                config.health, executor, state_dir=config.state_dir, spool_dir=config.spool,
                checks=config.health_checks,
            )
            if config.health is not None
            else None
        )  # fmt: skip
        self.across = AcrossChecks(
            executor, config.across_expect, state_dir=config.state_dir, spool_dir=config.spool,
            fail_requeues=config.health.fail_requeues if config.health else False,
            interval_s=config.across_interval_s,
        )  # fmt: skip

    # -- driving ------------------------------------------------------------------------------

    def wake(self) -> None:
        """Ask for a step now (a submit, a cancel, a node change)."""
        self._asked = True
        self._wake.set()

    def wake_prompt(self) -> None:
        """Ask for a step now for someone waiting at a terminal (``railyard run``): the
        step comes after the short coalescing window of exits, not the API's 50 ms, unless
        the last step took longer (its time stays the API's share under load)."""
        self._prompt = True
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        """Step on events (a submit, a cancel, a job's exit) and at the interval until
        ``stop`` is set."""
        if self.config.freeze_heap:
            freeze_heap()
        if isinstance(self.executor, NotifiesExits):  # a freed GPU need not wait for the poll
            self.executor.on_exit(self._wake.set)
        self.health.begin(self.clock())
        next_collect_s = time.perf_counter() + FULL_COLLECT_EVERY_S
        while not stop.is_set():
            began = time.perf_counter()
            stepped = self.step_or_report() is not None
            took_s = time.perf_counter() - began
            if self.config.freeze_heap and began >= next_collect_s:
                gc.collect()  # between steps: see FULL_COLLECT_EVERY_S
                next_collect_s = time.perf_counter() + FULL_COLLECT_EVERY_S
            if self._wake.wait(self._until_due_s() if stepped else self.config.cycle_interval_s):
                # Coalesce a burst of events into one cycle. After a request (a thousand
                # submits), leave the API at least as much time as the last step took; after
                # exits alone, GPUs are idle: only a short window, so that a gang's ranks
                # ending together are settled together.
                if self._asked:
                    stop.wait(max(self.config.event_coalesce_s, took_s))
                elif self._prompt:
                    stop.wait(max(self.config.exit_coalesce_s, took_s))
                else:
                    stop.wait(self.config.exit_coalesce_s)
            self._wake.clear()
            self._asked = self._prompt = False

    def _until_due_s(self) -> float:
        """How long to sleep when nothing happens: the interval, or less when the last plan
        says a warning signal, time limit, deadline or health check falls due sooner (so
        `--signal=SIG@T` lands T before the limit, not up to an interval later)."""
        interval_s = self.config.cycle_interval_s
        plan = self.last_plan
        if plan is None:
            return interval_s
        due_t_s = min(plan.next_deadline_t_s, plan.next_check_t_s)
        return min(interval_s, max(MIN_SLEEP_S, due_t_s - self.clock()))

    def step_or_report(self) -> StepReport | None:
        """One step; a failure is logged and told to /healthz, and the next step retries
        from the store (nothing was committed). A step that lost a race for the store (SQLite
        busy, a PostgreSQL deadlock) is run again at once, once, as the API runs a request
        again (`store.retries`): a lost race is not a failure of the loop. The store away (a
        database restarting) or a refusal is one line in the log, a bug its traceback."""
        for attempt in range(2):
            try:
                return self.step()
            except DBAPIError as exc:
                if attempt == 0 and is_transient(exc):
                    log.info("loop step lost a race for the store (%s): running it again", exc.orig)
                    continue
                failed: Exception = exc
            except Exception as exc:  # keep serving
                failed = exc
            break
        if isinstance(failed, OperationalError | ServiceError):  # the store away, a lost lease
            log.warning("loop step failed: %s", str(failed).strip().splitlines()[0])
        else:  # a bug: its traceback
            log.exception("loop step failed", exc_info=failed)
        self.health.failed(failed, self.clock())
        return None

    def reconcile(self) -> list[Exit]:
        """After a restart: re-attach to what is running, start what was decided but maybe
        not launched, re-send stops; exits found are settled by the next step."""
        with self.store.session() as session:
            rows = session.scalars(select(JobRow).where(JobRow.state.in_(HOLDING_STATES))).all()
            handles = [JobHandle.from_dict(r.handle) for r in rows if r.handle is not None]
            self.lost_shares.restore(session)  # before adoption: their nodes are suspect
            starting = [(r.id, r.restart_count) for r in rows if r.handle is None]
            stopping = [
                (r.id, r.state, r.preempt_deadline_t_s)
                for r in rows
                if r.state in (JobState.PREEMPTING.value, JobState.CANCELLING.value)
            ]
        exits = [exit_of(r, self.clock()) for r in self.executor.adopt(handles)]
        # decided and committed, maybe launched: started again by the steps (idempotent)
        self.starter.queue(starting, fresh=False)
        for job_id, state, deadline in stopping:
            if state == JobState.PREEMPTING.value:
                grace_s = max(0.0, (deadline or 0.0) - self.clock())
                self.executor.request_checkpoint_stop(job_id, grace_s)
            else:
                self.executor.cancel(job_id)
        self._carried.extend(exits)
        return exits

    def step(self) -> StepReport:
        step_began = time.perf_counter()
        report = StepReport()
        # 1. Exits first, so their GPUs are free for this cycle; health checks that ended
        #    are judged first, so the step sees what they did to their nodes.
        #    The users' exits are carried from the moment they are polled until a step that
        #    settles them commits: whatever fails after the poll (a locked store in the
        #    inventory's sync, the sweep, the plan) loses none of them.
        reports = self.executor.poll()
        polled_t_s = self.clock()  # an exit's end time: when the executor saw it
        if self.checks is not None:
            reports = self.checks.take(reports)
        reports = self.across.take(reports)
        self._carried = exits = [
            *self._carried,
            *self.starter.take_exits(),
            *(exit_of(r, polled_t_s) for r in reports),
        ]
        self.lost_shares.sync(polled_t_s)  # before these exits are settled
        if self.refresh is not None:  # after the poll: a machine it found gone is down now
            self.refresh()
        now_t_s = self.clock()
        if self.checks is not None:
            self._finish_checks(now_t_s)
        if self.across.ended:
            self._finish_across(now_t_s)
        ready = self._images_ready()
        if now_t_s >= self._next_sweep_t_s:
            self._next_sweep_t_s = now_t_s + self.config.sweep_interval_s
            exits += self._sweep(now_t_s, exits, report)
        self._carried = exits  # the sweep's too: until the plan is committed
        # 2-3. Read, plan, write the plan before acting on it.
        with self._world.committing(), self.store.session() as session:
            if ready:
                write_ready(session, ready, now_t_s)
            bounded = self._converting_steps < self.config.converting_steps_max
            limit = self.config.convert_max_rows if bounded else None
            given, seen = self._world.read(
                session, now_t_s, exits, self._last_accrual_t_s, convert_max_rows=limit
            )
            self._hold_broken(session, seen.broken, now_t_s)
            planned = None if seen.backlog else self._plan(session, given, seen, now_t_s, report)
        if planned is None:  # committed what it read and held; launches outside the transaction
            return self._converting(report, seen.backlog, step_began)
        plan, written = planned
        retry = set(written.unsettled) - set(written.broken)  # changed under the step: again
        self._carried = [e for e in exits if e.job_id in retry]  # committed: the rest settled
        self._ready_written.update((j, a) for j, (a, _) in ready.items())
        self._world.wrote(written.reasons)  # committed: the cache holds what the rows say
        self._world.settled(plan, seen, [job_id for job_id, _ in written.finished], now_t_s)
        self._end_broken(written.broken, now_t_s)
        attempts = {j.id: j.restart_count for j in given.pending}  # requeued by this plan:
        attempts |= {s.job_id: s.requeued.restart_count for s in plan.settled if s.requeued}
        self.starter.queue(((j, attempts[j]) for j in written.started), fresh=True)
        self._last_accrual_t_s = now_t_s
        self.last_plan = plan
        if written.started:
            first = set(written.started)
            report.waits_s = [
                now_t_s - j.submit_t_s
                for j in given.pending
                if j.id in first and j.restart_count == 0
            ]
        report.finished, report.requeued = written.finished, written.requeued
        # 4. Act, then record what the executor returned.
        self._act(written, report)
        report.started = self._launch()
        if self.checks is not None and plan.checks:
            with self.store.session() as session:
                report.checks = self.checks.start(session, plan.checks, now_t_s)
        if plan.group_check:
            with self.store.session() as session:
                started = self.across.start(session, plan.group_check, now_t_s)
            report.checks += [started] if started else []
        report.step_s = time.perf_counter() - step_began
        self.metrics.observe(report.cycle_s, report.step_s, report.waits_s)
        self.health.ok(self.clock())
        return report

    def _plan(
        self, session: Session, given: StepInput, seen: Seen, now_t_s: float, report: StepReport
    ) -> tuple[StepPlan, Written]:
        """Decide and write the plan, in the step's transaction."""
        self._converting_steps = 0
        health = self._health_input(session)
        if health is not None:
            given = replace(given, health=health)
        began = time.perf_counter()
        plan = lifecycle_step(given, self.config.scheduler, self._cache)
        report.cycle_s = time.perf_counter() - began
        return plan, write_plan(session, plan, seen, now_t_s)

    def _launch(self) -> list[str]:
        """Launch from the queue for the step's budget; what is left (or a job stopped before
        its launch, settled by an exit) wants the next step at once."""
        started = self.starter.launch(self.config.launch_budget_s)
        if self.starter.waiting or self.starter.exits:
            self._wake.set()
        return started

    def _hold_broken(
        self, session: Session, broken: Mapping[str, BaseException], now_t_s: float
    ) -> None:
        """Hold the pending jobs whose rows could not be converted (`control.world`)."""
        for job_id, exc in broken.items():
            reason = scheduler_error(exc)
            log.error("job %s held: its row cannot be read: %s", job_id, reason, exc_info=exc)
            same = JobRow.reason != reason
            if cas(session, job_id, JobState.PENDING.value, same, hold="admin", reason=reason,
                   nominated=False, updated_t_s=now_t_s):  # fmt: skip
                record(session, now_t_s, "hold", reason, job_id)

    def _end_broken(self, broken: Mapping[str, BaseException], now_t_s: float) -> None:
        """Jobs whose exit could not be settled: their processes ended, so they end FAILED with
        the error as their reason, each in a transaction of its own."""
        for job_id, exc in broken.items():
            reason = scheduler_error(exc)
            log.error("job %s ended: its exit cannot be settled: %s", job_id, reason,
                      exc_info=exc)  # fmt: skip
            failed = {"state": JobState.FAILED.value, "reason": reason, "end_t_s": now_t_s,
                      "updated_t_s": now_t_s}  # fmt: skip
            try:
                with self.store.session() as session:
                    if transition(session, job_id, _LIVE, failed):
                        record(session, now_t_s, JobState.FAILED.value, reason, job_id)
            except Exception as write_failed:  # the exit is settled again by the next step
                if isinstance(write_failed, OperationalError):  # the store away: one line
                    first = str(write_failed).strip().splitlines()[0]
                    log.warning("ending %s failed: %s", job_id, first)
                else:  # a bug: its traceback
                    log.exception("ending %s failed", job_id)
                self.health.failed(write_failed, now_t_s, step_ended=False)

    def _images_ready(self) -> dict[str, tuple[int, float]]:
        """Container jobs whose image the executor newly found on all their nodes."""
        if not isinstance(self.executor, ReportsReady):
            return {}
        now = dict(self.executor.ready())
        self._ready_written &= {(j, a) for j, (a, _) in now.items()}  # forget ended ones
        return {j: v for j, v in now.items() if (j, v[0]) not in self._ready_written}

    def _converting(self, report: StepReport, backlog: int, step_began: float) -> StepReport:
        """A step that only converted new pending rows (a 10,000-task array has just landed)
        and left more than ``convert_max_rows`` for the next: no plan is made until every
        pending job is seen, so a later job of higher priority is never passed over, and the
        next step comes as soon as the API has had as much time as this one took (`run`).
        Its exits are carried to that step. The steps that convert, each bounded, are what
        keeps other clients' requests fast while a big array lands (the whole conversion in
        one step held the process for most of a second). After ``converting_steps_max`` of
        them in a row (rows arriving or changing faster than steps read them) one step reads
        them all and plans: the loop never stops deciding."""
        self._converting_steps += 1
        report.backlog = backlog
        report.started = self._launch()  # what earlier steps decided goes on meanwhile
        log.debug("%d new pending jobs left to read", backlog)
        self.wake()
        report.step_s = time.perf_counter() - step_began
        self.health.ok(self.clock())
        return report

    def _sweep(self, now_t_s: float, exits: list[Exit], report: StepReport) -> list[Exit]:
        """Rows stranded past their deadline: STARTING is started again (the executor
        returns the running attempt's handle if it was launched), a stop whose processes the
        executor no longer has is settled by an exit this step; returns those exits."""
        reported = {e.job_id for e in exits}  # settled by this step: not started again
        with self.store.session() as session:
            stranded = overdue(session, now_t_s, self.health.deadlines)
            ids = [
                r.job_id
                for r in stranded
                if r.state == JobState.STARTING.value
                and r.job_id not in reported
                and not self.starter.queued(r.job_id)  # queued: launched in its turn
            ]
            again = []
            if ids:
                again = [(job_id, n) for job_id, n in session.execute(select(
                    JobRow.id, JobRow.restart_count).where(
                    JobRow.id.in_(ids), JobRow.handle.is_(None)))]  # fmt: skip
        if again:
            log.warning("starting again %d jobs stranded in STARTING: %s", len(again),
                        ", ".join(job_id for job_id, _ in again[:20]))  # fmt: skip
            report.relaunched = [job_id for job_id, _ in again]
            self.starter.queue(again, fresh=False)
        running = self.executor.running()
        stops = [r for r in stranded if r.state != JobState.STARTING.value]
        for r in stops:
            if r.job_id in running:  # still there: ask again (a repeat is harmless)
                self.executor.cancel(r.job_id)
        gone = [r for r in stops if r.job_id not in running and r.job_id not in reported]
        if gone:
            log.warning("settling %d stops whose processes are gone: %s", len(gone),
                        ", ".join(r.job_id for r in gone[:20]))  # fmt: skip
        report.settled_stuck = [r.job_id for r in gone]
        return [_gone(r, now_t_s) for r in gone]

    def _health_input(self, session: Session) -> HealthInput | None:
        """The checks' part of the step's input: scheduled checks, and an across-node sweep's
        nodes (held from new jobs) and the group it wants to test next."""
        health = self.checks.input(session) if self.checks is not None else None
        held = self.across.held(session, self.clock())
        if not held:
            return health
        health = health or health_input(session, ACROSS_ONLY)
        return with_sweep(health, held, self.across.wanted())

    def _finish_across(self, now_t_s: float) -> None:
        try:
            with self.store.session() as session:
                for line in self.across.finish(session, now_t_s):
                    log.info("health: %s", line)
        except ServiceError as exc:
            log.warning("health: an across-node sweep's verdict was not applied: %s", exc)

    def _finish_checks(self, now_t_s: float) -> None:
        assert self.checks is not None
        try:
            with self.store.session() as session:
                for line in self.checks.finish(session, now_t_s):
                    log.info("health: %s", line)
        except ServiceError as exc:  # the node changed under the run: it is checked again
            log.warning("health: a scheduled run was not applied: %s", exc)

    # -- acting ---------------------------------------------------------------------------------

    def _act(self, written: Written, report: StepReport) -> None:
        with self.store.session() as session:  # cancels the API wrote: resent (idempotent)
            rows = session.execute(
                select(JobRow.id, JobRow.stop_cause).where(
                    JobRow.state == JobState.CANCELLING.value
                )
            ).all()
            asked = signals_to_send(session)
        cancelling = [job_id for job_id, _ in rows]
        requeued = {job_id for job_id, cause in rows if cause == StopCause.REQUEUED.value}
        by_hand = {job_id for job_id, cause in rows if cause == StopCause.CANCELLED.value}
        self.starter.cancelled(cancelling, self.clock())  # never launched: not now either
        says = self.executor if isinstance(self.executor, SaysTimeLimits) else None
        for job_id in [*written.stopped, *cancelling]:
            if job_id in written.timed_out and says is not None:
                _each(job_id, "time out", says.time_out, job_id)  # says why, as Slurm
            elif job_id in requeued and says is not None:  # "DUE TO JOB REQUEUE", as Slurm
                _each(job_id, "requeue", says.time_out, job_id, "JOB REQUEUE")
            elif job_id in by_hand and says is not None:  # "CANCELLED AT ...", as scancel's
                _each(job_id, "cancel", says.time_out, job_id, "CANCEL")
            else:
                _each(job_id, "cancel", self.executor.cancel, job_id)
        if asked:  # scancel --signal: sent once, then cleared unless asked again meanwhile
            for job_id, signal_name in asked:
                _each(job_id, "signal", self.executor.signal, job_id, signal_name)
            with self.store.session() as session:
                for job_id, signal_name in asked:
                    signal_sent(session, job_id, signal_name)
        for job_id in written.warned:
            _each(job_id, "warning signal", self.executor.signal, job_id, None)
        for job_id, grace_s in written.preempted:
            _each(job_id, "preemption", self.executor.request_checkpoint_stop, job_id, grace_s)
            report.preempted.append(job_id)

    def _launch_spec(self, row: JobRow) -> LaunchSpec:
        config = self.config
        records = attempts_dir(config.state_dir, row.id)
        session = object_session(row)  # a bare script's srun steps: its queue's prefixes now
        steps = row.script is not None and not row.container and session is not None
        step_mounts = queue_mount_prefixes(session, row.queue) if steps and session else []
        return launch_spec(row, config.spool, config.nccl_env, config.cluster_name,
                           records=records, terminal_linger_s=config.terminal_linger_s,
                           step_mounts=step_mounts)  # fmt: skip


YOUNG_GC_THRESHOLD = 50_000
"""Allocations between young collections (CPython's default is 700), see `freeze_heap`."""

FULL_COLLECT_EVERY_S = 10.0
"""How often the loop runs a full collection, between two steps. With the heap frozen and
young passes rare, a full pass came so seldom that the cycles of each request and step
(SQLAlchemy's sessions, encoders) piled up: on SQLite the server grew 67 MiB/h under a
steady soak, 5 MiB/h with a full pass every 10 s (benchmarks/soak.py --memory). The frozen
heap is not scanned, so a pass costs what lives beyond it (milliseconds)."""


def freeze_heap() -> None:
    """Leave what the process holds at start (modules, the app, the store's engine: some
    150,000 objects) out of the garbage collector's full passes from now on, and collect the
    young generation less often.

    A full pass otherwise scans all of it, about 100 ms that land in whichever step runs into
    it: the loop's p99 with 10,000 pending jobs (benchmarks/bench_live.py). Garbage is
    collected once first, so only live objects are frozen; they are freed as usual when
    their references go (`gc.freeze`, as Instagram's servers do after start-up). A step over
    10,000 pending jobs holds tens of thousands of objects for a moment: every 700
    allocations a young pass found them alive and moved them on, and the moved ones set off
    a full pass of 20-40 ms about every third step, in the step or in whatever ran next (the
    process of bench_live: 23 full passes in 60 steps, 1.1 s of the collector's time; with
    `YOUNG_GC_THRESHOLD`, 0.16 s and none)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, middle, old)


def _each(job_id: str, what: str, act: Callable[..., object], *args: object) -> None:
    """One job's act on the executor; its exception is logged and the others go on (a
    cancel or a signal is sent again by a later step or the sweep)."""
    try:
        act(*args)
    except Exception:
        log.exception("%s of %s failed", what, job_id)


_LIVE = (JobState.RUNNING, JobState.CANCELLING, JobState.PREEMPTING, JobState.STARTING)


def _gone(row: Overdue, now_t_s: float) -> Exit:
    """The end of a stop whose processes are gone: cancelled, or preempted (requeued)."""
    kind = ExitKind.KILLED if row.state == JobState.CANCELLING.value else ExitKind.LOST
    return Exit(row.job_id, row.restart_count, kind, t_s=now_t_s)
