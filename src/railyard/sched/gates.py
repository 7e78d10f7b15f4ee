"""The gates a pending job passes before the cycle may consider it: a hold, a `--begin`
time, its dependencies (`sched.dependencies`), an array's throttle. Part of the lifecycle
step (`sched.lifecycle.step`), which both drivers run."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

from railyard.sched.decisions import Reason
from railyard.sched.dependencies import Verdict, first_of_name, verdict
from railyard.sched.model import Job, RunningJob


def gate(
    pending: Sequence[Job],
    running: Iterable[RunningJob],
    job_states: Mapping[str, str] | None = None,
    now_t_s: float = math.inf,
    job_times: Mapping[str, float] | None = None,
) -> tuple[list[Job], dict[str, Reason]]:
    """Jobs the cycle may consider, and why the others may not: a hold (`JobHeldUser`,
    `JobHeldAdmin`), a `--begin` time still ahead (`BeginTime`), a dependency not yet (or
    never) satisfied, or an array already running its `%N` tasks (later tasks wait, lowest
    index first, like Slurm). Only throttled tasks are taken in order (the cycle orders
    what it is given by its own keys, ties broken by id): sorting 10,000 pending jobs every
    step was a tenth of the live loop's lifecycle time (bench_live)."""
    running = list(running)
    states = job_states or {}
    singletons = first_of_name(pending, running) if any(j.name for j in pending) else {}
    live: dict[str, int] = {}
    for r in running:
        parent = r.job.array_parent
        if parent is not None:
            live[parent] = live.get(parent, 0) + 1
    eligible: list[Job] = []
    held: dict[str, Reason] = {}
    throttled: list[tuple[tuple[float, str, int, str], Job, str, int]] = []
    for job in pending:
        if job.hold is not None:
            held[job.id] = Reason.JOB_HELD_ADMIN if job.hold == "admin" else Reason.JOB_HELD_USER
            continue
        if job.begin_t_s is not None and now_t_s < job.begin_t_s:
            held[job.id] = Reason.BEGIN_TIME
            continue
        if job.dependencies:
            v = verdict(job, states, singletons, job_times, now_t_s)
            if v is not Verdict.HOLDS:
                never = v is Verdict.NEVER
                held[job.id] = Reason.DEPENDENCY_NEVER_SATISFIED if never else Reason.DEPENDENCY
                continue
        parent, limit = job.array_parent, job.array_max_running
        if parent is not None and limit is not None:
            throttled.append((_array_order(job), job, parent, limit))
        else:
            eligible.append(job)
    for _, job, parent, limit in sorted(throttled, key=itemgetter(0)):
        if live.get(parent, 0) >= limit:
            held[job.id] = Reason.JOB_ARRAY_TASK_LIMIT
            continue
        live[parent] = live.get(parent, 0) + 1
        eligible.append(job)
    return eligible, held


def _array_order(job: Job) -> tuple[float, str, int, str]:
    index = job.array_index if job.array_index is not None else -1
    return (job.submit_t_s, job.array_parent or "", index, job.id)
