"""What-if from the live state: the simulator (the same scheduler and lifecycle code) run on
the cluster as it is now, to say when each pending job should start.

The twin starts from now: the nodes in their current states, the queues with their quotas,
the running jobs holding GPUs until their time limit runs out (or the default estimate), the
pending jobs in submit order with their time limits as run times. Where a job has no limit,
`default_run_s` stands in (the queue's DefaultTime when it has one). Jobs without GPUs are
left out (the simulator's traces are GPU jobs).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.convert import to_node, to_queue
from railyard.control.tables import HOLDING_STATES, JobRow, JobState, NodeRow, QueueRow, User
from railyard.sched import SchedulerConfig
from railyard.sim.driver import SimConfig, Simulation
from railyard.sim.workload import TraceJob, Workload

DEFAULT_RUN_S = 3600.0
HORIZON_JOBS = 500  # pending jobs simulated at most (the first in line)


@dataclass(frozen=True)
class Expected:
    job_id: str
    queue: str
    user: str
    gpus: int
    start_in_s: float | None  # None: does not start in the simulated horizon


def expected_starts(
    session: Session,
    scheduler: SchedulerConfig,
    now_t_s: float,
    *,
    user_id: int | None = None,
    default_run_s: float = DEFAULT_RUN_S,
) -> list[Expected]:
    """When each pending job (of `user_id`, or everyone's) is expected to start."""
    nodes = [to_node(r) for r in session.scalars(select(NodeRow).order_by(NodeRow.name))]
    queue_rows = list(session.scalars(select(QueueRow)))
    queues = [to_queue(r) for r in queue_rows]
    default_of = {q.name: q.default_time_s or default_run_s for q in queue_rows}
    names: dict[int, str] = {i: n for i, n in session.execute(select(User.id, User.name))}
    trace: list[TraceJob] = []
    for row in session.scalars(select(JobRow).where(JobRow.state.in_(HOLDING_STATES))):
        gpus = row.workers * row.gpus_per_worker
        if gpus < 1:
            continue
        limit = row.walltime_s or default_of.get(row.queue, default_run_s)
        left = max(60.0, limit - (now_t_s - (row.start_t_s or now_t_s)))
        trace.append(TraceJob(f"running:{row.id}", 0.0, gpus, left, queue=row.queue,
                              user=names.get(row.user_id, "?"), priority=10**6))  # fmt: skip
    pending = session.scalars(
        select(JobRow)
        .where(JobRow.state == JobState.PENDING.value)
        .order_by(JobRow.submit_t_s, JobRow.number)
        .limit(HORIZON_JOBS)
    ).all()
    for i, row in enumerate(pending):
        gpus = row.workers * row.gpus_per_worker
        if gpus < 1:
            continue
        run_s = row.walltime_s or default_of.get(row.queue, default_run_s)
        trace.append(TraceJob(row.id, 1e-3 * (i + 1), gpus, run_s, queue=row.queue,
                              user=names.get(row.user_id, "?"), priority=row.priority,
                              walltime_s=row.walltime_s, preemptible=row.preemptible))  # fmt: skip
    if not trace:
        return []
    config = SimConfig(scheduler=scheduler, keep_submit_time=True)
    log = Simulation(nodes, Workload.of("live", trace), config, queues).run()
    out = []
    for row in pending:
        if user_id is not None and row.user_id != user_id:
            continue
        record = log.records.get(row.id)
        started = record.first_start_t_s if record is not None else None
        out.append(Expected(row.id, row.queue, names.get(row.user_id, "?"),
                            row.workers * row.gpus_per_worker, started))  # fmt: skip
    return out
