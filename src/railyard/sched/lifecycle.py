"""The job lifecycle around the cycle: one pure `step` both drivers apply.

A driver (the live loop on the wall clock, the simulator on a virtual one) gathers what it
knows into a `StepInput` (the cluster as it was, the exits its executor reported, the time)
and applies the `StepPlan` it gets back, in this order: settlements, warnings and stops,
then the cycle's decisions, drains and usage. Every rule that decides when a job may start
or stop lives here or in the cycle, so the digital twin answers for the live cluster:

1. settle exits: completed, failed (with the signal that killed it), cancelled, TIMEOUT, or
   back to the queue after a preemption, a node failure (Slurm's `--requeue`, up to
   `max_restarts`) or a loss while the control plane was down;
2. time limits: the warning signal `warn_before_s` ahead (Slurm's `--signal`), then a stop
   at the limit (the job ends TIMEOUT; Slurm kills after `KillWait`); an interactive job
   unused for its queue's `idle_limit_s` is stopped too (reason `IdleLimit`, ends TIMEOUT);
3. gates: holds, dependencies (`Dependency`, `DependencyNeverSatisfied`; once met, cleared
   and the job dated then, `StepPlan.satisfied`), array throttles (`%N`, `JobArrayTaskLimit`);
4. the cycle itself, on the state after settlements, with nominations carried over;
5. drains: a draining node with nothing left on it is drained;
6. fair-share usage accrued for the time since the last step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from railyard.sched.accounting import accrue_usage
from railyard.sched.cache import CycleCache
from railyard.sched.config import SchedulerConfig
from railyard.sched.cycle import cycle
from railyard.sched.decisions import CycleResult, Reason
from railyard.sched.dependencies import met_now, next_after_t_s
from railyard.sched.gates import gate
from railyard.sched.health import HealthInput, checks_after
from railyard.sched.limits import latest_start_t_s, time_limit_s
from railyard.sched.model import (
    ClusterState,
    Job,
    Node,
    NodeState,
    Queue,
    RunningJob,
    StopCause,
    Usage,
)
from railyard.sched.stops import Stop, stop_intents


class ExitKind(StrEnum):
    """How an attempt ended, as the executor saw it."""

    COMPLETED = "completed"  # every rank exited 0 and nobody asked it to stop
    FAILED = "failed"  # a rank exited non-zero or by a signal nobody sent
    PREEMPTED = "preempted"  # asked to checkpoint and stop; exited 0 within the grace
    KILLED = "killed"  # terminated by us (cancel, limit, preemption past its grace)
    LOST = "lost"  # vanished while the control plane was down; exit unknown
    NODE_FAIL = "node_fail"  # its node died under it


class EndState(StrEnum):
    """Final states, Slurm's `sacct` names in lower case."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    NODE_FAIL = "node_fail"
    DEADLINE = "deadline"  # never started: it could no longer end by its --deadline


@dataclass(frozen=True)
class Exit:
    job_id: str
    restart_count: int
    kind: ExitKind
    exit_code: int | None = None
    signal: str | None = None
    t_s: float | None = None  # when it exited, if known (else the step's time)
    reason: str | None = None  # why it could not start, as the executor knows (ImagePullFailed)


@dataclass(frozen=True)
class Settlement:
    """Where an attempt's end takes the job: an end state, or back to the queue as
    `requeued` (one more restart, its service so far counted)."""

    job_id: str
    reason: str
    end: EndState | None = None
    requeued: Job | None = None
    exit: Exit | None = None


def settle(
    run: RunningJob, ended: Exit, now_t_s: float, *, keep_submit_time: bool = True
) -> Settlement:
    """The rule for one exit, given why (if at all) we had asked the job to stop."""
    job, cause, kind = run.job, run.stop_cause, ended.kind
    if cause is StopCause.CANCELLED:
        if kind is ExitKind.COMPLETED:
            return Settlement(job.id, "Completed", EndState.COMPLETED, exit=ended)
        return Settlement(job.id, "Cancelled", EndState.CANCELLED, exit=ended)
    if cause is StopCause.TIME_LIMIT or cause is StopCause.IDLE_LIMIT:
        return Settlement(job.id, cause.value, EndState.TIMEOUT, exit=ended)
    asked_again = cause is StopCause.REQUEUED  # scontrol requeue: however it ended
    finished = kind is ExitKind.COMPLETED or (kind is ExitKind.PREEMPTED and cause is None)
    if finished and not asked_again:
        # Finished before any stop reached it; or exited 0 after the time-limit warning alone
        # (--signal=SIG@T): the executor saw the signal, but nobody asked the job to stop, and
        # Slurm counts that COMPLETED too (afterok dependents then run).
        return Settlement(job.id, "Completed", EndState.COMPLETED, exit=ended)
    end_t_s = ended.t_s if ended.t_s is not None else now_t_s
    again = requeue_after_stop(run, end_t_s, keep_submit_time=keep_submit_time)
    if asked_again or cause is StopCause.PREEMPTED:
        why = "scontrol requeue" if asked_again else "Preempted"
        return Settlement(job.id, f"Requeued ({why})", requeued=again, exit=ended)
    retries_left = job.restart_count < job.max_restarts
    if cause is StopCause.NODE_DOWN or kind is ExitKind.NODE_FAIL:
        if job.requeue and retries_left:
            return Settlement(job.id, "Requeued (NodeFail)", requeued=again, exit=ended)
        return Settlement(job.id, "NodeFail", EndState.NODE_FAIL, exit=ended)
    if kind is ExitKind.LOST and retries_left:
        reason = "Requeued (lost while the control plane was down)"
        return Settlement(job.id, reason, requeued=again, exit=ended)
    if kind is ExitKind.FAILED or kind is ExitKind.KILLED:
        why = ended.reason or (f"Signal {ended.signal}" if ended.signal else "NonZeroExitCode")
        return Settlement(job.id, why, EndState.FAILED, exit=ended)
    return Settlement(job.id, kind.value.capitalize(), EndState.FAILED, exit=ended)


def requeue_after_stop(run: RunningJob, end_t_s: float, *, keep_submit_time: bool = True) -> Job:
    """The pending job to resubmit once a preempted or failed attempt has stopped.

    Keeping the original submit time means a preempted job does not lose its place in line;
    the service the attempt got counts towards its attained service (time slicing).
    """
    job = run.job
    ran_s = max(0.0, end_t_s - run.start_t_s)
    return replace(
        job,
        restart_count=job.restart_count + 1,
        submit_t_s=job.submit_t_s if keep_submit_time else run.start_t_s,
        attained_gpu_s=job.attained_gpu_s + run.gpus * ran_s,
        nominated=False,
    )


# -- time limits -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeActions:
    warn: tuple[str, ...] = ()  # send the job's warning signal now
    stop: tuple[str, ...] = ()  # the limit is reached: stop it, it ends TIMEOUT
    next_t_s: float = math.inf  # the next time a warning or limit falls due
    idle: tuple[str, ...] = ()  # interactive, unused for its queue's idle limit: stop it


def time_limits(
    running: Iterable[RunningJob], queues: Mapping[str, Queue], now_t_s: float
) -> TimeActions:
    warn: list[str] = []
    stop: list[str] = []
    idle: list[str] = []
    next_t_s = math.inf
    default: dict[str, float | None] = {}  # per queue: the limit of a job that gives none
    for r in running:
        if r.stop_cause is not None:
            continue
        if r.job.interactive:
            idle_t_s = idle_deadline_t_s(r, queues.get(r.job.queue))
            if now_t_s >= idle_t_s:
                idle.append(r.id)
                continue
            next_t_s = min(next_t_s, idle_t_s)
        limit = r.job.walltime_s
        if limit is None:
            queue = r.job.queue
            if queue not in default:
                default[queue] = time_limit_s(r.job, queues.get(queue))
            limit = default[queue]
            if limit is None:
                continue
        end_t_s = r.limit_from_t_s + limit
        if now_t_s >= end_t_s:
            stop.append(r.id)
            continue
        next_t_s = min(next_t_s, end_t_s)
        before = r.job.warn_before_s
        if before is not None and not r.warned:
            warn_t_s = end_t_s - before
            if now_t_s >= warn_t_s:
                warn.append(r.id)
            else:
                next_t_s = min(next_t_s, warn_t_s)
    return TimeActions(tuple(sorted(warn)), tuple(sorted(stop)), next_t_s, tuple(sorted(idle)))


def idle_deadline_t_s(run: RunningJob, queue: Queue | None) -> float:
    """When an interactive job is stopped unless its user sends it something first: its
    queue's idle limit after its last activity (or its start); never without a limit."""
    if queue is None or queue.idle_limit_s is None:
        return math.inf
    return max(run.start_t_s, run.active_t_s or run.start_t_s) + queue.idle_limit_s


def _first_deadline(
    result: CycleResult, eligible: Sequence[Job], queues: Mapping[str, Queue], now_t_s: float
) -> float:
    """The earliest warning or limit of the jobs this step starts (they run from now); for
    an interactive one, also its idle limit from now (a driver that knows of later activity
    finds the deadline later when it steps then)."""
    if not result.starts:
        return math.inf
    started = result.started_ids
    first = math.inf
    for job in eligible:
        if job.id not in started:
            continue
        queue = queues.get(job.queue)
        limit = time_limit_s(job, queue)
        if limit is not None:
            first = min(first, now_t_s + limit - (job.warn_before_s or 0.0))
        if job.interactive and queue is not None and queue.idle_limit_s is not None:
            first = min(first, now_t_s + queue.idle_limit_s)
    return first


# -- gates before the cycle --------------------------------------------------------------------


def past_deadline(
    pending: Sequence[Job], queues: Mapping[str, Queue], now_t_s: float
) -> tuple[tuple[str, ...], list[Job], float]:
    """Pending jobs that could no longer end by their `--deadline` (now is past their latest
    start), the others, and when the next of those others falls due (just after its latest
    start: starting at that very instant still ends in time)."""
    expired: list[str] = []
    kept: list[Job] = []
    next_t_s = math.inf
    for job in pending:
        latest = latest_start_t_s(job, queues.get(job.queue))
        if now_t_s > latest:
            expired.append(job.id)
            continue
        kept.append(job)
        if latest < math.inf:
            next_t_s = min(next_t_s, math.nextafter(latest, math.inf))
    return tuple(expired), kept, next_t_s


# -- drains and history --------------------------------------------------------------------------


def drained(nodes: Iterable[Node], running: Iterable[RunningJob]) -> list[str]:
    """Draining nodes with nothing left on them (Slurm's DRAINING -> DRAINED)."""
    busy = {name for r in running for name in r.placement}
    return sorted(n.name for n in nodes if n.state is NodeState.DRAINING and n.name not in busy)


def history_run(s: Settlement, run: RunningJob, now_t_s: float) -> tuple[str, str, float] | None:
    """The run a settlement adds to the run-time history, `(queue, user, run_s)`: a first
    attempt that completed (a restarted job's last attempt is not its run time)."""
    if s.end is not EndState.COMPLETED or run.job.restart_count != 0:
        return None
    end_t_s = s.exit.t_s if s.exit is not None and s.exit.t_s is not None else now_t_s
    return run.job.queue, run.job.user, end_t_s - run.start_t_s


# -- the step -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepInput:
    """What a driver knows at a step: the cluster as it was, the exits since the last step."""

    nodes: Sequence[Node]
    queues: Sequence[Queue]
    pending: Sequence[Job]
    running: Sequence[RunningJob]
    exits: Sequence[Exit]
    now_t_s: float
    usage: Usage = field(default_factory=Usage)
    last_accrual_t_s: float | None = None
    runtime_history_s: Mapping[tuple[str, str | None], float] = field(default_factory=dict)
    keep_submit_time: bool = True
    job_states: Mapping[str, str] = field(default_factory=dict)
    """State ("pending", "running" or an end state) of every job a pending job depends on."""
    job_times: Mapping[str, float] = field(default_factory=dict)
    """When each of those started (or ended, unstarted): `after:ID+MIN` counts from it."""
    no_deadline_before_t_s: float | None = None
    """A driver that kept the last plan's `next_deadline_t_s` may pass it: until then no time
    limit or warning can fall due, and the step skips scanning the running jobs for one."""
    health: HealthInput | None = None
    """Health checks the scheduler runs on idle nodes (None: none); a node being checked
    takes no job."""


@dataclass(frozen=True)
class StepPlan:
    """What the driver must write and do, in this order."""

    settled: tuple[Settlement, ...]
    warn: tuple[str, ...]
    stop: tuple[str, ...]  # newly past their time limit: cause TIME_LIMIT
    result: CycleResult
    held: Mapping[str, Reason]
    drained: tuple[str, ...]
    usage: Usage
    next_deadline_t_s: float = math.inf  # when the next warning or time limit falls due
    checks: tuple[str, ...] = ()  # nodes whose health check starts now (idle, due)
    next_check_t_s: float = math.inf  # when the next periodic check falls due
    group_check: tuple[str, ...] = ()  # an across-node check's group, idle now: start it
    expired: tuple[str, ...] = ()  # could no longer end by their --deadline: end DEADLINE
    stops: tuple[Stop, ...] = ()
    """Every stop this step asks for, typed (`sched.stops`): time limits (also in `stop`),
    preemptions and node-down requeues (`result`); a driver acts on these alone."""
    satisfied: tuple[str, ...] = ()  # met dependencies: clear them, begin now (`met_now`)
    abandoned: tuple[str, ...] = ()
    """Pending jobs whose dependency can never be met and that asked to be cancelled then
    (sbatch --kill-on-invalid-dep=yes): end CANCELLED, reason DependencyNeverSatisfied."""

    @property
    def reasons(self) -> dict[str, Reason]:
        """Why each pending job waits: the gates' reasons and the cycle's."""
        return {**self.held, **self.result.pending_reasons}


def step(given: StepInput, config: SchedulerConfig, cache: CycleCache | None = None) -> StepPlan:
    """Settle exits, enforce limits, gate, run the cycle, drain, and accrue: one step."""
    now = given.now_t_s
    queues = {q.name: q for q in given.queues}

    # 1. Settle what exited (an exit of an older attempt or a gone job is stale: ignored).
    settled: list[Settlement] = []
    running = list(given.running)
    if given.exits:
        by_id = {r.id: r for r in running}
        for ended in given.exits:
            run = by_id.get(ended.job_id)
            if run is None or run.job.restart_count != ended.restart_count:
                continue
            del by_id[ended.job_id]
            settled.append(settle(run, ended, now, keep_submit_time=given.keep_submit_time))
        running = list(by_id.values())
    pending = list(given.pending) + [s.requeued for s in settled if s.requeued is not None]

    # 2. Time limits: the warning ahead, the stop at the limit.
    hint = given.no_deadline_before_t_s
    if hint is not None and now < hint:
        limits = TimeActions(next_t_s=hint)
    else:
        limits = time_limits(running, queues, now)
    if limits.stop or limits.idle:
        cause = dict.fromkeys(limits.stop, StopCause.TIME_LIMIT)
        cause.update(dict.fromkeys(limits.idle, StopCause.IDLE_LIMIT))
        running = [replace(r, stop_cause=cause[r.id]) if r.id in cause else r for r in running]

    # 3. Deadlines, gates, then 4. the cycle on what is left.
    expired: tuple[str, ...] = ()
    expire_t_s = math.inf
    if any(j.deadline_t_s is not None for j in pending):
        expired, pending, expire_t_s = past_deadline(pending, queues, now)
    states = dict(given.job_states)
    for s in settled:  # what this step settled counts already
        states[s.job_id] = s.end.value if s.end is not None else "pending"
    eligible, held = gate(pending, running, states, now, given.job_times)
    never = Reason.DEPENDENCY_NEVER_SATISFIED
    abandoned = tuple(j.id for j in pending if j.kill_on_invalid_dep and held.get(j.id) is never)
    for job_id in abandoned:
        del held[job_id]
    eligible, satisfied = met_now(eligible, now)
    down = {n.name for n in given.nodes if n.state is NodeState.DOWN}
    on_down = bool(down) and any(
        r.stop_cause is None and not down.isdisjoint(r.placement) for r in running
    )
    result = CycleResult()
    if eligible or on_down:  # else the cycle would decide nothing: skip it
        state = ClusterState(
            _unchecked(given), given.queues, eligible, running, given.usage,
            given.runtime_history_s,
        )  # fmt: skip
        result = cycle(state, now, config, cache)
    next_t_s = min(limits.next_t_s, _first_deadline(result, eligible, queues, now), expire_t_s)
    begins = (j.begin_t_s for j in pending if held.get(j.id) is Reason.BEGIN_TIME)
    next_t_s = min(next_t_s, min((t for t in begins if t is not None), default=math.inf))
    if given.job_times:  # an after:ID+MIN falls due
        waiting = (j for j in pending if held.get(j.id) is Reason.DEPENDENCY)
        next_t_s = min(next_t_s, next_after_t_s(waiting, given.job_times, now))
    checks: tuple[str, ...] = ()
    group: tuple[str, ...] = ()
    check_t_s = math.inf
    if given.health is not None:
        checks, group, check_t_s = checks_after(given.health, given.nodes, running, result, now)

    # 5. Drains: a draining node whose last job has just been settled is drained now.
    draining = any(n.state is NodeState.DRAINING for n in given.nodes)
    done = drained(given.nodes, running) if draining else []

    # 6. Usage: the jobs that held GPUs since the last accrual (including those that just
    #    exited: they held their GPUs until now) are charged for that time.
    usage = given.usage
    last = given.last_accrual_t_s
    if last is not None and now > last:
        usage = accrue_usage(
            usage, given.running, given.queues, now - last, config.fairshare_half_life_s
        )
    return StepPlan(
        settled=tuple(settled),
        warn=limits.warn,
        stop=limits.stop,
        result=result,
        held=held,
        drained=tuple(done),
        usage=usage,
        next_deadline_t_s=next_t_s,
        checks=checks,
        next_check_t_s=check_t_s,
        group_check=group,
        stops=stop_intents(limits.stop, result, limits.idle),
        expired=expired,
        satisfied=satisfied,
        abandoned=abandoned,
    )


def _unchecked(given: StepInput) -> Sequence[Node]:
    """The nodes as the cycle sees them: one being checked, or held for its first check (the
    gate), takes no job, as if draining."""
    health = given.health
    if health is None:
        return given.nodes
    gate = health.policy.gate_joins
    last = health.last_check_t_s
    if not health.checking and not (gate and len(last) < len(given.nodes)):
        return given.nodes
    return [
        replace(n, state=NodeState.DRAINING)
        if n.state is NodeState.READY
        and (n.name in health.checking or (gate and n.name not in last))
        else n
        for n in given.nodes
    ]
