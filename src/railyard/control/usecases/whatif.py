"""What-if from the live state: the twin's input read from the store (nodes in their current
states, queues with their quotas, running jobs holding GPUs until their time limit runs out,
pending jobs in submit order with their time limits as run times), and the expected starts
of the actor's own pending jobs (an admin: everyone's).

The simulator is not control's to import (control sits below sim), so the caller passes it in
as `simulate`: the twin sees every job, the viewer only theirs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.store.convert import to_node, to_queue
from railyard.control.store.tables import HOLDING_STATES, JobRow, JobState, NodeRow, QueueRow, User
from railyard.sched import Node, Queue

DEFAULT_RUN_S = 3600.0
HORIZON_JOBS = 500  # pending jobs simulated at most (the first in line)
RUNNING_PRIORITY = 10**6  # a running job goes first in the twin: it already holds its GPUs


@dataclass(frozen=True)
class TwinJob:
    """One job of the twin's trace (the simulator's TraceJob, field for field)."""

    job_id: str
    submit_s: float
    gpus: int
    runtime_s: float
    queue: str
    user: str
    priority: int
    walltime_s: float | None = None
    preemptible: bool = False


@dataclass(frozen=True)
class WhatIfInput:
    nodes: list[Node]
    queues: list[Queue]
    jobs: list[TwinJob]  # running ones first (ids "running:<id>"), then pending in line


@dataclass(frozen=True)
class Expected:
    job_id: str
    queue: str
    user: str
    gpus: int
    start_in_s: float | None  # None: does not start in the simulated horizon


Simulate = Callable[[WhatIfInput], dict[str, float | None]]  # job id -> first start, s


def expected_starts(
    session: Session,
    actor: User,
    now_t_s: float,
    simulate: Simulate,
    *,
    default_run_s: float = DEFAULT_RUN_S,
) -> list[Expected]:
    """When each pending job the actor may see is expected to start. Jobs without a time
    limit run their queue's DefaultTime, or `default_run_s`; jobs without GPUs are left out
    of the twin (its traces are GPU jobs)."""
    found, pending, names = _live(session, now_t_s, default_run_s)
    if not found.jobs:
        return []
    started = simulate(found)
    return [
        Expected(row.id, row.queue, names.get(row.user_id, "?"),
                 row.workers * row.gpus_per_worker, started.get(row.id))
        for row in pending
        if actor.is_admin or row.user_id == actor.id
    ]  # fmt: skip


def every_start(
    session: Session, now_t_s: float, simulate: Simulate, default_run_s: float = DEFAULT_RUN_S
) -> dict[str, float | None]:
    """Each pending job's expected start as Unix time (None: not within the twin's horizon),
    for a cache that answers each viewer about the jobs they may see (`web.whatif`)."""
    found, pending, _ = _live(session, now_t_s, default_run_s)
    started = simulate(found) if found.jobs else {}
    out: dict[str, float | None] = {}
    for row in pending:
        offset = started.get(row.id)
        out[row.id] = None if offset is None else now_t_s + offset
    return out


TEST_ONLY_ID = "test-only"


def expected_start_of(
    session: Session,
    job: TwinJob,
    now_t_s: float,
    simulate: Simulate,
    *,
    default_run_s: float = DEFAULT_RUN_S,
) -> float | None:
    """sbatch --test-only: when ``job``, submitted now behind every pending job, would
    start (seconds from now; None: not within the horizon)."""
    found, pending, _ = _live(session, now_t_s, default_run_s)
    last = 1e-3 * (len(pending) + 1)
    queue = session.get(QueueRow, job.queue)
    run_s = job.runtime_s or (queue.default_time_s if queue else None) or default_run_s
    mine = TwinJob(TEST_ONLY_ID, last, job.gpus, run_s, job.queue, job.user, job.priority,
                   job.walltime_s, job.preemptible)  # fmt: skip
    started = simulate(WhatIfInput(found.nodes, found.queues, [*found.jobs, mine]))
    return started.get(TEST_ONLY_ID)


def _live(
    session: Session, now_t_s: float, default_run_s: float
) -> tuple[WhatIfInput, list[JobRow], dict[int, str]]:
    """The twin's input from the store: running jobs first, then the pending line."""
    nodes = [to_node(r) for r in session.scalars(select(NodeRow).order_by(NodeRow.name))]
    queue_rows = list(session.scalars(select(QueueRow)))
    default_of = {q.name: q.default_time_s or default_run_s for q in queue_rows}
    names: dict[int, str] = {i: n for i, n in session.execute(select(User.id, User.name))}
    trace: list[TwinJob] = []
    for row in session.scalars(select(JobRow).where(JobRow.state.in_(HOLDING_STATES))):
        gpus = row.workers * row.gpus_per_worker
        if gpus < 1:
            continue
        limit = row.walltime_s or default_of.get(row.queue, default_run_s)
        left = max(60.0, limit - (now_t_s - (row.start_t_s or now_t_s)))
        trace.append(TwinJob(f"running:{row.id}", 0.0, gpus, left, row.queue,
                             names.get(row.user_id, "?"), RUNNING_PRIORITY))  # fmt: skip
    pending = list(
        session.scalars(
            select(JobRow)
            .where(JobRow.state == JobState.PENDING.value)
            .order_by(JobRow.submit_t_s, JobRow.number)
            .limit(HORIZON_JOBS)
        )
    )
    for i, row in enumerate(pending):
        gpus = row.workers * row.gpus_per_worker
        if gpus < 1:
            continue
        run_s = row.walltime_s or default_of.get(row.queue, default_run_s)
        trace.append(TwinJob(row.id, 1e-3 * (i + 1), gpus, run_s, row.queue,
                             names.get(row.user_id, "?"), row.priority, row.walltime_s,
                             row.preemptible))  # fmt: skip
    return WhatIfInput(nodes, [to_queue(r) for r in queue_rows], trace), pending, names
