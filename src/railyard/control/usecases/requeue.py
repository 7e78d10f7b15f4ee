"""``scontrol requeue``: stop a running job and put it back in the queue, one restart more.

The API writes CANCELLING with the stop cause ``Requeued`` by compare-and-set on the states
that have processes and wakes the loop; the loop stops the job as for a cancel, and
:func:`railyard.sched.lifecycle.settle` sends the stopped job back to pending with its
restart count one higher, as after a preemption. Its output files start over, as Slurm
22.05's (``--open-mode=append`` keeps them), after slurmstepd's ``*** JOB N ON node
CANCELLED AT ... DUE TO JOB REQUEUE ***`` line. ``requeuehold`` brings it back held. A job
that does not run has nothing to
requeue here (409): railyard requeues running jobs only, where Slurm also requeues finished
batch jobs.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from railyard.control.errors import Conflict
from railyard.control.store.effects import record_many, request_wake
from railyard.control.store.tables import JobRow, JobState, User
from railyard.control.store.transitions import transition_many
from railyard.control.usecases.jobs import job_targets
from railyard.sched import StopCause

REQUEUEABLE = (JobState.STARTING, JobState.RUNNING)
"""States whose job may be requeued: a job already being stopped goes where that stop says."""


def requeue_job(
    session: Session, actor: User, job_id: str, now_t_s: float, *, hold: bool = False
) -> list[tuple[JobRow, str]]:
    """Stop the job (an array's id: its running tasks) and queue it again; 409 when none runs.
    With ``hold`` (scontrol requeuehold) it comes back held: a user's hold, or an admin's on
    another user's job, as ``hold`` gives (the loop's settle keeps it and says so)."""
    targets = job_targets(session, actor, job_id)
    values = {"state": JobState.CANCELLING.value, "stop_cause": StopCause.REQUEUED.value,
              "reason": f"requeued by {actor.name}"[:256], "updated_t_s": now_t_s}  # fmt: skip
    kinds: dict[str | None, list[str]] = {}
    for row, _ in targets:
        if JobState(row.state) in REQUEUEABLE:
            kind = (
                ("admin" if actor.is_admin and row.user_id != actor.id else "user")
                if hold
                else None
            )
            kinds.setdefault(kind, []).append(row.id)
    changed: set[str] = set()
    for kind, ids in kinds.items():
        held = {"hold": kind} if kind is not None else {}
        changed.update(
            transition_many(session, ids, REQUEUEABLE, {**values, **held}, retry_conflicts=True)
        )
    if not changed:
        state = targets[0][0].state if len(targets) == 1 else "not running"
        raise Conflict(
            f"job {job_id} is {state}: only a running job can be requeued",
            hint="railyard requeue acts on running jobs; resubmit a finished one",
        )
    line = f"requeue{' and hold' if hold else ''} asked by {actor.name}"
    record_many(session, now_t_s, [("requeue", line, done) for done in sorted(changed)])
    request_wake(session)
    return [(row, name) for row, name in targets if row.id in changed]
