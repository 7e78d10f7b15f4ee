"""A third, minimal driver of `sched.lifecycle.step` for tests: jobs run for a given time,
stop at the next step when asked, and everything that happens is logged. It applies a plan
the way the live loop and the simulator do, so a property that holds here holds there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from railyard.sched import (
    ClusterState,
    CycleCache,
    Job,
    RunningJob,
    SchedulerConfig,
    StartReason,
    StopCause,
    Usage,
    cycle,
)
from railyard.sched.lifecycle import Exit, ExitKind, StepInput
from railyard.sched.lifecycle import step as lifecycle_step


@dataclass
class Run:
    """What a driven run did: (t_s, kind, job, detail) in order."""

    log: list[tuple[float, str, str, str]] = field(default_factory=list)
    pending: dict[str, Job] = field(default_factory=dict)
    running: dict[str, RunningJob] = field(default_factory=dict)
    ended: dict[str, str] = field(default_factory=dict)
    preempt_reasons: dict[tuple[float, str], str] = field(default_factory=dict)
    """(t_s, victim) -> the PreemptReason's value the cycle gave for that eviction."""

    def kinds(self, kind: str) -> list[tuple[float, str, str]]:
        return [(t, j, d) for t, k, j, d in self.log if k == kind]


def drive(
    state: ClusterState,
    config: SchedulerConfig,
    *,
    runtime_s: Mapping[str, float],
    until_t_s: float,
    dt_s: float = 10.0,
    start_t_s: float = 0.0,
    stop_after_s: float = 0.0,
) -> Run:
    """Step every `dt_s` until `until_t_s` or until nothing is left. A job needs
    `runtime_s[id]` of work (default: its walltime, else forever), kept across attempts as if
    it checkpointed perfectly; asked to stop, it exits at the first step `stop_after_s` later
    (PREEMPTED after a preemption, KILLED otherwise)."""
    run = Run()
    done_s: dict[str, float] = {}  # work finished in earlier attempts
    run.pending = {j.id: j for j in state.pending}
    run.running = {r.id: r for r in state.running}
    asked: dict[str, float] = {}
    usage, cache = Usage(), CycleCache()
    now = start_t_s
    while now <= until_t_s and (run.pending or run.running):
        exits: list[Exit] = []
        for r in run.running.values():
            length = runtime_s.get(r.id, r.job.walltime_s or float("inf")) - done_s.get(r.id, 0)
            if r.stop_cause is not None and now >= asked[r.id] + stop_after_s:
                kind = (
                    ExitKind.PREEMPTED if r.stop_cause is StopCause.PREEMPTED else ExitKind.KILLED
                )
                exits.append(Exit(r.id, r.job.restart_count, kind, t_s=now))
            elif now >= r.start_t_s + length:
                exits.append(Exit(r.id, r.job.restart_count, ExitKind.COMPLETED, 0, t_s=now))
        plan = lifecycle_step(
            StepInput(
                state.nodes,
                state.queues,
                tuple(run.pending.values()),
                tuple(run.running.values()),
                exits,
                now,
                usage,
                now - dt_s if now > start_t_s else None,
            ),
            config,
            cache,
        )
        usage = plan.usage
        for s in plan.settled:
            stopped = run.running.pop(s.job_id)
            done_s[s.job_id] = done_s.get(s.job_id, 0.0) + now - stopped.start_t_s
            if s.requeued is not None:
                run.pending[s.job_id] = s.requeued
                run.log.append((now, "requeue", s.job_id, s.reason))
            else:
                assert s.end is not None
                run.ended[s.job_id] = s.end.value
                run.log.append((now, "end", s.job_id, s.end.value))
        for job_id in plan.expired:  # past its --deadline: ends unrun
            del run.pending[job_id]
            run.ended[job_id] = "deadline"
            run.log.append((now, "end", job_id, "deadline"))
        for stop in plan.stops:
            run.running[stop.job_id] = stop.applied(run.running[stop.job_id])
            asked[stop.job_id] = now
            if stop.cause is StopCause.TIME_LIMIT:
                run.log.append((now, "timeout", stop.job_id, ""))
            elif stop.handshake:
                run.log.append((now, "preempt", stop.job_id, stop.preempt_for or ""))
        result = plan.result
        for p in result.preemptions:
            run.preempt_reasons[(now, p.job_id)] = p.reason.value
        for s in result.starts:
            job = replace(run.pending.pop(s.job_id), nominated=False)
            backfilled = s.reason is StartReason.BACKFILL
            run.running[s.job_id] = RunningJob(job, s.placement, now, backfilled=backfilled)
            run.log.append((now, "start", s.job_id, ",".join(sorted(s.placement))))
        for job_id, job in list(run.pending.items()):
            if job.nominated != (job_id in result.nominated):
                run.pending[job_id] = replace(job, nominated=job_id in result.nominated)
        for job_id, reason in plan.reasons.items():
            run.log.append((now, "reason", job_id, reason.value))
        now += dt_s
    return run


def fits_empty_cluster(state: ClusterState, job: Job, config: SchedulerConfig) -> bool:
    """Would `job` start alone on this inventory with nothing else running?"""
    alone = ClusterState(state.nodes, state.queues, [replace(job, nominated=False)], ())
    return bool(cycle(alone, 0.0, config).starts)
