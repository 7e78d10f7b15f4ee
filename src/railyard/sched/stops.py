"""Typed stop intents: every stop a lifecycle step asks for, with its cause and grace.

A step stops running jobs for four reasons of its own (a time limit, an idle limit, a
preemption, a node that went down); each becomes one `Stop`, so a driver does not re-derive
from a decision's kind what to persist or how to stop it. It persists the stop (`applied`:
the cause and, for a stop that requeues, the job it makes way for) and acts on `handshake`:
the checkpoint handshake (signal, then kill after `grace_s`) or an immediate kill. A cancel
from a user or admin is the driver's own input, never a step's intent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from railyard.sched.decisions import CycleResult
from railyard.sched.model import RunningJob, StopCause

TIME_LIMIT_REASON = "TimeLimit"  # Slurm's reason for a job stopped at its time limit
IDLE_LIMIT_REASON = "IdleLimit"  # an interactive job nobody used for its queue's idle limit


@dataclass(frozen=True)
class Stop:
    job_id: str
    cause: StopCause
    reason: str  # for people: the job's reason while it stops
    grace_s: float = 0.0  # time to checkpoint before the kill (the handshake only)
    preempt_for: str | None = None  # a requeueing stop: the job it makes way for, or NodeDown

    @property
    def handshake(self) -> bool:
        """Signal and wait `grace_s` for a checkpoint (a preemption); else kill now."""
        return self.cause is StopCause.PREEMPTED

    @property
    def requeues(self) -> bool:
        """The job goes back to the queue when it exits (`lifecycle.settle`)."""
        return self.cause in (StopCause.PREEMPTED, StopCause.NODE_DOWN)

    def applied(self, run: RunningJob) -> RunningJob:
        """The running job as it is while this stop takes effect."""
        preempt_for = self.preempt_for if self.requeues else run.preempt_for
        return replace(run, stop_cause=self.cause, preempt_for=preempt_for)


def stop_intents(
    time_limited: Iterable[str], result: CycleResult, idle: Iterable[str] = ()
) -> tuple[Stop, ...]:
    """A step's stops, in the order a driver applies them: time limits, idle sessions,
    preemptions, then jobs on nodes that went down."""
    return (
        *(Stop(j, StopCause.TIME_LIMIT, TIME_LIMIT_REASON) for j in time_limited),
        *(Stop(j, StopCause.IDLE_LIMIT, IDLE_LIMIT_REASON) for j in idle),
        *(
            Stop(
                p.job_id,
                StopCause.PREEMPTED,
                f"Preempted ({p.reason.value} for {p.for_job_id})",
                p.grace_s,
                p.for_job_id,
            )
            for p in result.preemptions
        ),
        *(
            Stop(rq.job_id, StopCause.NODE_DOWN, rq.reason, 0.0, StopCause.NODE_DOWN.value)
            for rq in result.requeues
        ),
    )
