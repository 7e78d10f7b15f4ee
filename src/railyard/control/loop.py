"""The scheduler loop: the scheduler core on the wall clock, acting through an executor.

One step, in order:

1. Collect exits from the executor and settle those jobs (completed, requeued, failed).
2. Send what was decided but not yet sent: cancels, time limits.
3. Take a snapshot of the store and run ``sched.cycle``.
4. Write every decision (STARTING with its placement, PREEMPTING with its deadline, pending
   reasons) and commit, then act on it through the executor, then write what the executor
   returned (the job handle, RUNNING).
5. Accrue fair-share usage.

Because the decision is durable before the act, a restart reconciles instead of guessing
(:meth:`Loop.reconcile`): STARTING jobs are started again (the executor's start is
idempotent per attempt), RUNNING and stopping jobs are adopted by pid and start time, and
exits that happened while we were away are read from the ranks' exit files.

Only the loop's thread touches the executor; the API writes rows and calls :meth:`wake`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from railyard.control.convert import (
    SCHED_COLUMNS,
    to_job,
    to_node,
    to_queue,
    to_running,
    usage_from_rows,
    usage_keys,
)
from railyard.control.health import STALLED_AFTER_S, LoopHealth
from railyard.control.paths import (
    attempts_dir,
    checkpoint_dir,
    job_dir,
    logs_dir,
    script_path,
)
from railyard.control.store import Store
from railyard.control.tables import EventRow, JobRow, JobState, NodeRow, QueueRow, UsageRow, User
from railyard.control.transitions import transition
from railyard.exec.protocol import Executor, ExitReport, JobHandle, LaunchSpec, Outcome
from railyard.sched import (
    ClusterState,
    CycleResult,
    Job,
    NodeState,
    SchedulerConfig,
    accrue_usage,
    cycle,
)

log = logging.getLogger("railyard.loop")

ARRAY_LIMIT_REASON = "JobArrayTaskLimit"  # Slurm's reason for a throttled array element
TIME_LIMIT_REASON = "TimeLimit"


@dataclass(frozen=True)
class LoopConfig:
    """Where job files go, how often the loop runs without events, and the policies."""

    state_dir: Path
    cycle_interval_s: float = 2.0
    event_coalesce_s: float = 0.05
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    nccl_env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class StepReport:
    """What one step did; the tests and the metrics read it."""

    started: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    finished: list[tuple[str, str]] = field(default_factory=list)  # (job id, final state)
    requeued: list[str] = field(default_factory=list)
    cycle_s: float = 0.0


class Loop:
    """Drives scheduling and execution; see the module docstring for the order of a step."""

    def __init__(
        self,
        store: Store,
        executor: Executor,
        config: LoopConfig,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.executor = executor
        self.config = config
        self.clock = clock
        self._wake = threading.Event()
        self.health = LoopHealth(stalled_after_s=max(STALLED_AFTER_S, 30 * config.cycle_interval_s))
        self._last_accrual_t_s: float | None = None
        self._pending_cache: dict[str, tuple[float, Job, int | None]] = {}

    # -- driving ------------------------------------------------------------------------------

    def wake(self) -> None:
        """Ask for a step now (a submit, a cancel, a node change)."""
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        """Step on events and at the interval until ``stop`` is set."""
        self.health.begin(self.clock())
        while not stop.is_set():
            began = time.perf_counter()
            try:
                self.step()
                self.health.ok(self.clock())
            except Exception as exc:  # keep serving; the next step retries from the store
                log.exception("service step failed")
                self.health.failed(exc)
            took_s = time.perf_counter() - began
            if self._wake.wait(self.config.cycle_interval_s):
                # Coalesce a burst of events (a thousand submits) into one cycle, and leave
                # the API at least as much time as the last step took.
                stop.wait(max(self.config.event_coalesce_s, took_s))
            self._wake.clear()

    def reconcile(self) -> list[ExitReport]:
        """After a restart: re-attach to what is running, settle what ended while we were away."""
        with self.store.session() as session:
            rows = session.scalars(
                select(JobRow).where(JobRow.state.in_([s.value for s in _LIVE]))
            ).all()
            handles = [JobHandle.from_dict(r.handle) for r in rows if r.handle is not None]
            starting = [r for r in rows if r.handle is None]
            specs = [self._launch_spec(r) for r in starting]
        reports = self.executor.adopt(handles)
        for spec in specs:  # decided and committed, maybe launched: start is idempotent
            self._start(spec)
        with self.store.session() as session:
            for row in session.scalars(
                select(JobRow).where(JobRow.state == JobState.PREEMPTING.value)
            ):
                grace_s = max(0.0, (row.preempt_deadline_t_s or 0.0) - self.clock())
                self.executor.request_checkpoint_stop(row.id, grace_s)
        self._settle(reports, StepReport())
        return reports

    def step(self) -> StepReport:
        report = StepReport()
        # 1. Exits first, so their GPUs are free for this cycle.
        self._settle(self.executor.poll(), report)
        now_t_s = self.clock()
        # 2. Decided but not yet sent: cancels and time limits.
        self._send_stops(now_t_s)
        # 3. Snapshot and cycle.
        with self.store.session() as session:
            state, reasons, held = self._snapshot(session)
            started = time.perf_counter()
            result = cycle(state, now_t_s, self.config.scheduler)
            report.cycle_s = time.perf_counter() - started
            # 4a. Write the decisions before acting on them.
            specs = self._write_decisions(session, result, now_t_s, reasons, held)
            self._accrue(session, state, now_t_s)
            self._settle_drains(session, state, now_t_s)
        # 4b. Act, then record what the executor returned.
        for preempt in result.preemptions:
            self.executor.request_checkpoint_stop(preempt.job_id, preempt.grace_s)
            report.preempted.append(preempt.job_id)
        for requeue in result.requeues:
            self.executor.cancel(requeue.job_id)
        for spec in specs:
            if self._start(spec):
                report.started.append(spec.job_id)
        return report

    # -- the parts of a step ------------------------------------------------------------------

    def _snapshot(self, session: Session) -> tuple[ClusterState, dict[str, str], dict[str, str]]:
        """The cluster as the scheduler sees it, the current reason of each pending job, and
        the array elements held over their limit (with their reason)."""
        users = {u.id: u.name for u in session.scalars(select(User))}
        nodes = [to_node(r) for r in session.scalars(select(NodeRow).order_by(NodeRow.name))]
        queues = [to_queue(r) for r in session.scalars(select(QueueRow))]
        live_states = [s.value for s in _LIVE]
        live = session.execute(select(*SCHED_COLUMNS).where(JobRow.state.in_(live_states))).all()
        waiting = self._pending_jobs(session, users)
        running_by_array: dict[str, int] = {}
        for r in live:
            if r.array_parent is not None:
                running_by_array[r.array_parent] = running_by_array.get(r.array_parent, 0) + 1
        pending: list[Job] = []
        held: dict[str, str] = {}
        for job, limit, _ in waiting:
            parent = job.array_parent
            if parent is not None and limit is not None:
                if running_by_array.get(parent, 0) >= limit:
                    held[job.id] = ARRAY_LIMIT_REASON
                    continue
                running_by_array[parent] = running_by_array.get(parent, 0) + 1
            pending.append(job)
        running = [to_running(r, users.get(r.user_id, "?")) for r in live]
        usage = usage_from_rows(session.scalars(select(UsageRow)))
        state = ClusterState(
            nodes=nodes, queues=queues, pending=pending, running=running, usage=usage
        )
        reasons = {job.id: reason for job, _, reason in waiting}
        return state, reasons, held

    def _pending_jobs(
        self, session: Session, users: dict[int, str]
    ) -> list[tuple[Job, int | None, str]]:
        """(job, array limit, reason) of every pending job in submit order.

        Converting ten thousand rows to jobs on every cycle would starve the API, so jobs are
        cached by id and ``updated_t_s`` (every write to a job row bumps it) and only new or
        changed rows are read in full.
        """
        keys: list[tuple[str, float, str]] = [
            (r[0], r[1], r[2])
            for r in session.execute(
                select(JobRow.id, JobRow.updated_t_s, JobRow.reason)
                .where(JobRow.state == JobState.PENDING.value)
                .order_by(JobRow.submit_t_s, JobRow.id)
            )
        ]
        cache = self._pending_cache
        stale = [job_id for job_id, updated, _ in keys if cache.get(job_id, (None,))[0] != updated]
        for chunk in range(0, len(stale), 500):
            ids = stale[chunk : chunk + 500]
            for r in session.execute(select(*SCHED_COLUMNS).where(JobRow.id.in_(ids))):
                job = to_job(r, users.get(r.user_id, "?"))
                cache[r.id] = (r.updated_t_s, job, r.array_max_running)
        self._pending_cache = {job_id: cache[job_id] for job_id, _, _ in keys}
        return [(cache[i][1], cache[i][2], reason) for i, _, reason in keys]

    def _write_decisions(
        self,
        session: Session,
        result: CycleResult,
        now_t_s: float,
        reasons: dict[str, str],
        held: dict[str, str],
    ) -> list[LaunchSpec]:
        """Record starts, preemptions, requeues and changed reasons; return what to launch.

        Each is a compare-and-set from the state the snapshot saw: a job cancelled since is
        neither started nor preempted (the executor's stop for it is then a no-op).
        """
        started: list[str] = []
        for start in result.starts:
            placement = {node: list(gpus) for node, gpus in start.placement.items()}
            reason = start.reason.value + (" (borrowing)" if start.borrowing else "")
            values = {"state": JobState.STARTING.value, "placement": placement,
                      "start_t_s": now_t_s, "reason": reason, "updated_t_s": now_t_s}  # fmt: skip
            if transition(session, start.job_id, [JobState.PENDING], values):
                session.add(_event(now_t_s, start.job_id, "start", f"{reason} on {placement}"))
                started.append(start.job_id)
        for preempt in result.preemptions:
            reason = f"Preempted ({preempt.reason.value} for {preempt.for_job_id})"
            values = {"state": JobState.PREEMPTING.value, "preempt_for": preempt.for_job_id,
                      "preempt_deadline_t_s": now_t_s + preempt.grace_s, "reason": reason,
                      "updated_t_s": now_t_s}  # fmt: skip
            if transition(session, preempt.job_id, _STARTED, values):
                session.add(_event(now_t_s, preempt.job_id, "preempt", reason))
        for requeue in result.requeues:
            values = {"state": JobState.PREEMPTING.value, "preempt_for": requeue.reason,
                      "preempt_deadline_t_s": now_t_s, "reason": requeue.reason,
                      "updated_t_s": now_t_s}  # fmt: skip
            if transition(session, requeue.job_id, _STARTED, values):
                session.add(_event(now_t_s, requeue.job_id, "requeue", requeue.reason))
        rows = {r.id: r for r in session.scalars(select(JobRow).where(JobRow.id.in_(started)))}
        specs = [self._launch_spec(rows[job_id]) for job_id in started]
        changed: dict[str, list[str]] = {}
        for job_id, reason in {
            **{k: v.value for k, v in result.pending_reasons.items()},
            **held,
        }.items():
            if job_id in reasons and reasons[job_id] != reason:
                changed.setdefault(reason, []).append(job_id)
        for reason, ids in changed.items():  # one UPDATE per distinct reason
            session.execute(
                update(JobRow)
                .where(JobRow.id.in_(ids), JobRow.state == JobState.PENDING.value)
                .values(reason=reason, updated_t_s=now_t_s)
            )
        return specs

    def _settle_drains(self, session: Session, state: ClusterState, now_t_s: float) -> None:
        """A draining node with nothing left on it is drained (Slurm's DRAINING -> DRAINED)."""
        busy = {node for r in state.running for node in r.placement}
        for row in session.scalars(
            select(NodeRow).where(NodeRow.state == NodeState.DRAINING.value)
        ):
            if row.name not in busy:
                row.state = NodeState.DRAINED.value
                row.updated_t_s = now_t_s
                session.add(
                    EventRow(
                        t_s=now_t_s, job_id=None, kind="drained", message=f"node {row.name} drained"
                    )
                )

    def _start(self, spec: LaunchSpec) -> bool:
        """Launch through the executor and record the handle; a failure fails the job."""
        try:
            handle = self.executor.start(spec)
        except Exception as exc:  # a launch that cannot happen must not wedge the queue
            log.exception("start of %s failed", spec.job_id)
            self._finish(spec.job_id, JobState.FAILED, f"LaunchFailed: {exc}", None, None)
            return False
        with self.store.session() as session:  # maybe cancelled or preempted meanwhile
            values = {"handle": handle.to_dict(), "updated_t_s": self.clock()}
            running = {**values, "state": JobState.RUNNING.value}
            attempt = spec.restart_count
            if not transition(session, spec.job_id, [JobState.STARTING], running, attempt=attempt):
                transition(session, spec.job_id, _STOPPING, values, attempt=attempt)
        return True

    def _send_stops(self, now_t_s: float) -> None:
        """Cancels the API wrote, and jobs past their time limit (Slurm's TIMEOUT)."""
        with self.store.session() as session:
            for row in session.scalars(
                select(JobRow).where(JobRow.state == JobState.CANCELLING.value)
            ):
                self.executor.cancel(row.id)
            running = session.execute(
                select(JobRow.id, JobRow.walltime_s, JobRow.start_t_s).where(
                    JobRow.state == JobState.RUNNING.value
                )
            ).all()
            for job_id, limit, began in running:
                if limit is not None and began is not None and now_t_s > began + limit:
                    values = {"state": JobState.CANCELLING.value, "reason": TIME_LIMIT_REASON,
                              "updated_t_s": now_t_s}  # fmt: skip
                    if transition(session, job_id, [JobState.RUNNING], values):
                        session.add(_event(now_t_s, job_id, "timeout", "time limit reached"))
                        self.executor.cancel(job_id)

    def _settle(self, reports: list[ExitReport], step: StepReport) -> None:
        """Turn executor exits into final or requeued states, once each."""
        for report in reports:
            for _ in range(_SETTLE_TRIES):  # a compare-and-set lost to a cancel: decide again
                with self.store.session() as session:
                    row = session.get(JobRow, report.job_id)
                    if row is None or not JobState(row.state).holds_gpus:
                        break  # already settled (a report can repeat after adoption)
                    if row.restart_count != report.restart_count:
                        break  # an older attempt's report
                    seen = JobState(row.state)
                    state, reason = _settlement(row, report.outcome)
                if state == JobState.PENDING:
                    if self._requeue(report.job_id, reason, seen, report.restart_count):
                        step.requeued.append(report.job_id)
                        break
                    continue
                if report.signal is not None and reason == "NonZeroExitCode":
                    reason = f"Signal {report.signal}"  # Slurm's 0:9, not an exit code
                if self._finish(report.job_id, state, reason, report.exit_code, report.outcome,
                                expected=(seen,), signal=report.signal):  # fmt: skip
                    step.finished.append((report.job_id, state.value))
                    break

    def _requeue(self, job_id: str, reason: str, seen: JobState, attempt: int) -> bool:
        now_t_s = self.clock()
        values = {"state": JobState.PENDING.value, "restart_count": attempt + 1, "reason": reason,
                  "placement": None, "handle": None, "start_t_s": None, "preempt_for": None,
                  "preempt_deadline_t_s": None, "last_checkpoint_t_s": None,
                  "updated_t_s": now_t_s}  # fmt: skip
        with self.store.session() as session:
            if not transition(session, job_id, [seen], values, attempt=attempt):
                return False
            session.add(_event(now_t_s, job_id, "requeue", f"{reason}; restart {attempt + 1}"))
        return True

    def _finish(
        self,
        job_id: str,
        state: JobState,
        reason: str,
        exit_code: int | None,
        outcome: Outcome | None,
        *,
        expected: tuple[JobState, ...] | None = None,
        signal: str | None = None,
    ) -> bool:
        """Move a started job to its final state, if it is still in one of ``expected``."""
        now_t_s = self.clock()
        values = {"state": state.value, "reason": reason, "exit_code": exit_code,
                  "exit_signal": signal, "outcome": outcome.value if outcome else None,
                  "end_t_s": now_t_s, "updated_t_s": now_t_s}  # fmt: skip
        with self.store.session() as session:
            if not transition(session, job_id, expected or _LIVE, values):
                return False
            exit_text = f"signal {signal}" if signal else f"exit {exit_code}"
            session.add(_event(now_t_s, job_id, state.value, f"{reason}; {exit_text}"))
        return True

    def _accrue(self, session: Session, state: ClusterState, now_t_s: float) -> None:
        """Decay and charge fair-share usage for the time since the last step."""
        last = self._last_accrual_t_s
        self._last_accrual_t_s = now_t_s
        if last is None or now_t_s <= last:
            return
        usage = accrue_usage(
            state.usage,
            state.running,
            state.queues,
            now_t_s - last,
            self.config.scheduler.fairshare_half_life_s,
        )
        existing = {r.key: r for r in session.scalars(select(UsageRow))}
        for key, gpu_s in usage_keys(usage).items():
            row = existing.get(key)
            if row is None:
                session.add(UsageRow(key=key, gpu_s=gpu_s, updated_t_s=now_t_s))
            else:
                row.gpu_s = gpu_s
                row.updated_t_s = now_t_s

    def _launch_spec(self, row: JobRow) -> LaunchSpec:
        state_dir = self.config.state_dir
        command = tuple(row.command)
        if row.script is not None:
            job_dir(state_dir, row.id).mkdir(parents=True, exist_ok=True)
            script = script_path(state_dir, row.id)
            script.write_text(row.script, encoding="utf-8")
            command = ("bash", str(script))
        return LaunchSpec(
            job_id=row.id,
            command=command,
            placement={node: tuple(gpus) for node, gpus in (row.placement or {}).items()},
            gpus_per_worker=row.gpus_per_worker,
            workers=row.workers,
            restart_count=row.restart_count,
            env={**slurm_compat_env(row), **row.env},
            workdir=Path(row.workdir) if row.workdir else Path.cwd(),
            log_dir=logs_dir(state_dir, row.id),
            checkpoint_dir=checkpoint_dir(state_dir, row.id),
            preempt_signal=row.preempt_signal,
            nccl_env=dict(self.config.nccl_env),
            records_dir=attempts_dir(state_dir, row.id),
        )


_LIVE = (JobState.STARTING, JobState.RUNNING, JobState.PREEMPTING, JobState.CANCELLING)
_STARTED = (JobState.STARTING, JobState.RUNNING)  # what a preemption or requeue moves from
_STOPPING = (JobState.RUNNING, JobState.PREEMPTING, JobState.CANCELLING)
_SETTLE_TRIES = 3


def slurm_compat_env(row: JobRow) -> dict[str, str]:
    """The Slurm variables batch scripts commonly read, so #SBATCH scripts run unchanged."""
    env = {"SLURM_JOB_ID": row.id, "SLURM_JOB_NAME": row.name or "railyard",
           "SLURM_RESTART_COUNT": str(row.restart_count)}  # fmt: skip
    if row.array_parent is not None and row.array_index is not None:
        env |= {
            "SLURM_ARRAY_JOB_ID": row.array_parent,
            "SLURM_ARRAY_TASK_ID": str(row.array_index),
            "RAILYARD_ARRAY_TASK_ID": str(row.array_index),
        }
    return env


def _settlement(row: JobRow, outcome: Outcome) -> tuple[JobState, str]:
    """The state a job moves to when its attempt ends, and why."""
    state = JobState(row.state)
    if state == JobState.CANCELLING:
        if row.reason == TIME_LIMIT_REASON:
            return JobState.FAILED, TIME_LIMIT_REASON
        return (
            (JobState.COMPLETED, "Completed")
            if outcome == Outcome.COMPLETED
            else (JobState.CANCELLED, "Cancelled")
        )
    if outcome == Outcome.COMPLETED:  # finished before a stop signal reached it
        return JobState.COMPLETED, "Completed"
    if state == JobState.PREEMPTING:
        why = "NodeDown" if row.preempt_for == "NodeDown" else "Preempted"
        return JobState.PENDING, f"Requeued ({why})"
    retries_left = row.restart_count < row.max_restarts
    if outcome == Outcome.LOST and retries_left:
        return JobState.PENDING, "Requeued (lost while the control plane was down)"
    if outcome == Outcome.FAILED and row.requeue_on_failure and retries_left:
        return JobState.PENDING, "Requeued (failed)"
    return JobState.FAILED, "NonZeroExitCode" if outcome == Outcome.FAILED else outcome.value


def _event(t_s: float, job_id: str, kind: str, message: str) -> EventRow:
    return EventRow(t_s=t_s, job_id=job_id, kind=kind, message=message)
