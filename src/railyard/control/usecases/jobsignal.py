"""``scancel --signal``: a signal for a running job's processes, delivered by the loop.

The API records the request on the job (``signal_request``) by compare-and-set on the
states that have processes, and wakes the loop; the loop, which holds the executor, sends it
to every rank's process group once (``Executor.signal``, as Slurm's warning signal) and then
clears the request by compare-and-set, so a request is sent once even across a restart of
the server between the two (at most once more, if the server dies after sending). A pending
job has nothing to signal (409), as scancel says of one.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from railyard.control.errors import Conflict
from railyard.control.store.effects import record_many, request_wake
from railyard.control.store.tables import JobRow, JobState, User
from railyard.control.store.transitions import transition_many
from railyard.control.usecases.jobs import job_targets

SIGNALLABLE = (JobState.RUNNING, JobState.PREEMPTING)
"""States whose processes run; STARTING's may not exist yet, and CANCELLING's are ending."""


def signal_job(
    session: Session, actor: User, job_id: str, signal_name: str, now_t_s: float
) -> list[tuple[JobRow, str]]:
    """Ask the loop to send ``signal_name`` to the job (an array's id: its running tasks);
    returns those it will reach. 409 when none runs."""
    targets = job_targets(session, actor, job_id)
    running = [row.id for row, _ in targets if JobState(row.state) in SIGNALLABLE]
    values = {"signal_request": signal_name, "updated_t_s": now_t_s}
    changed = set(transition_many(session, running, SIGNALLABLE, values, retry_conflicts=True))
    if not changed:
        state = targets[0][0].state if len(targets) == 1 else "not running"
        raise Conflict(
            f"job {job_id} is {state}: only a running job can be signalled",
            hint="railyard cancel ID ends a pending one",
        )
    line = f"{actor.name} asked for {signal_name}"
    record_many(session, now_t_s, [("signal", line, done) for done in sorted(changed)])
    request_wake(session)
    return [(row, name) for row, name in targets if row.id in changed]


def signals_to_send(session: Session) -> list[tuple[str, str]]:
    """(job id, signal) of the requests the loop has not sent; a running job's only."""
    stmt = select(JobRow.id, JobRow.signal_request).where(
        JobRow.state.in_([s.value for s in SIGNALLABLE]), JobRow.signal_request.is_not(None)
    )
    return [(job_id, name) for job_id, name in session.execute(stmt) if name]


def signal_sent(session: Session, job_id: str, signal_name: str) -> None:
    """Clear a request once sent, unless a newer one took its place (compare-and-set)."""
    session.execute(
        update(JobRow)
        .where(JobRow.id == job_id, JobRow.signal_request == signal_name)
        .values(signal_request=None)
    )
