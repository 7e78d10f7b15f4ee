"""What the local executor remembers about a job, and how a finished job's outcome is decided.

The decision reads only recorded facts (rank exits, what we asked for, what the wrappers say
they received), so an adopted job is judged by the same rules as one we started.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from enum import IntEnum

from railyard.exec.protocol import ExitReport, JobHandle, Outcome, WorkerHandle
from railyard.exec.task.exitfile import UNKNOWN, RankExit


class Stage(IntEnum):
    """How far a job's shutdown has gone; it only moves forward."""

    RUNNING = 0
    PREEMPTING = 1  # preempt signal sent; waiting out the grace
    TERMINATING = 2  # SIGTERM sent; waiting out the term grace
    KILLING = 3  # SIGKILL sent


@dataclass
class RankState:
    handle: WorkerHandle
    proc: subprocess.Popen[bytes] | None  # None when adopted: not our child
    exit: RankExit | None = None


@dataclass
class JobState:
    handle: JobHandle
    ranks: list[RankState]
    stage: Stage = Stage.RUNNING
    deadline: float | None = None
    stop_requested: bool = False
    cancelled: bool = False
    escalated: bool = False  # the checkpoint grace ran out and we sent SIGTERM
    ready_t_s: float | None = None  # a container job: when its image was ready for every rank
    first_failure: RankState | None = field(default=None, repr=False)

    def live(self) -> list[RankState]:
        return [r for r in self.ranks if r.exit is None]

    def done(self) -> bool:
        return all(r.exit is not None for r in self.ranks)


def decide(job: JobState) -> ExitReport:
    """The outcome of a job whose ranks have all exited.

    A job whose ranks all exited 0 without receiving the preempt signal or SIGTERM finished on
    its own, whatever we asked too late. Otherwise, in order: cancelled -> killed; asked to stop
    and every rank exited 0 -> preempted; asked to stop and terminated -> killed; the first
    failing rank vanished -> lost; a rank exited non-zero -> failed; a rank's end is unknown ->
    lost. "Asked to stop" also counts when a wrapper recorded the preempt signal: that is how
    an adopted job remembers a stop requested before the control plane restarted.
    """
    exits = [r.exit or UNKNOWN for r in job.ranks]
    signalled = any(job.handle.preempt_signal in e.signals_received for e in exits)
    terminated = any(
        e.signal in ("SIGTERM", "SIGKILL") or "SIGTERM" in e.signals_received for e in exits
    )
    all_clean = all(e.clean for e in exits)
    stop = job.stop_requested or signalled
    unclean = [r for r, e in zip(job.ranks, exits, strict=True) if e.known and not e.clean]
    first = job.first_failure
    if all_clean and not signalled and not terminated:
        outcome = Outcome.COMPLETED
    elif job.cancelled:
        outcome = Outcome.KILLED
    elif stop and all_clean:
        outcome = Outcome.PREEMPTED
    elif stop and (job.escalated or terminated):
        outcome = Outcome.KILLED
    elif first is not None and not (first.exit or UNKNOWN).known:
        outcome = Outcome.LOST  # a rank vanished; the others' SIGTERM says nothing of why
    elif unclean:
        outcome = Outcome.FAILED
    else:
        outcome = Outcome.LOST
    decisive = (first or (unclean[0] if unclean else job.ranks[0])).exit or UNKNOWN
    return ExitReport(
        job_id=job.handle.job_id,
        exit_code=decisive.exit_code,
        signal=decisive.signal,
        outcome=outcome,
        restart_count=job.handle.restart_count,
        reason=decisive.reason if outcome is Outcome.FAILED else None,
    )
