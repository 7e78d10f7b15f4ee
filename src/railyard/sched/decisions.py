"""What a cycle decides. Each decision carries its reason, in Slurm's or Kueue's words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from railyard.sched.model import Placement


class Reason(StrEnum):
    """Why a pending job did not start (the `squeue` reason column), in Slurm's words where
    Slurm has one, Kueue's otherwise."""

    PRIORITY = "Priority"  # jobs ahead of it hold the GPUs it could use (reservation, order)
    RESOURCES = "Resources"  # not enough free GPUs of its flavor; may hold a reservation
    QUOTA = "QOSGrpGRES"  # GPUs are free, but its queue's quota (with borrowing) is used up
    REQ_NODE_NOT_AVAIL = "ReqNodeNotAvail"  # would fit only if drained/down nodes were back
    TOPOLOGY = "Topology"  # enough GPUs, but not within the required topology domain
    FRAGMENTATION = "Fragmentation"  # enough free GPUs in total, not in the gang's shape
    PREEMPTING = "Preempting"  # victims were signalled; their GPUs are held for it
    UNSCHEDULABLE = "Unschedulable"  # can never be placed on this inventory or quota
    BAD_CONSTRAINTS = "BadConstraints"  # unknown queue or flavor
    PARTITION_TIME_LIMIT = "PartitionTimeLimit"  # time limit above its queue's maximum
    JOB_ARRAY_TASK_LIMIT = "JobArrayTaskLimit"  # its array already runs its %N tasks
    DEPENDENCY = "Dependency"  # waits for jobs it depends on
    DEPENDENCY_NEVER_SATISFIED = "DependencyNeverSatisfied"  # a dependency can no longer hold
    JOB_HELD_USER = "JobHeldUser"  # held by its owner
    JOB_HELD_ADMIN = "JobHeldAdmin"  # held by an admin
    BEGIN_TIME = "BeginTime"  # its --begin time has not come


class StartReason(StrEnum):
    FITS = "Fits"
    BACKFILL = "Backfill"  # started ahead of a reserved job without delaying it


class PreemptReason(StrEnum):
    RECLAIM = "Reclaim"  # lender takes back nominal quota the victim's queue borrowed
    PRIORITY = "Priority"  # higher priority, in a queue that opted in to priority preemption
    RESERVATION = "Reservation"  # a preemptible job backfilled across the reservation it yields
    TIME_SLICE = "TimeSlice"  # time-sliced policy: the victim has had more service


@dataclass(frozen=True)
class Start:
    job_id: str
    placement: Placement
    reason: StartReason = StartReason.FITS
    borrowing: bool = False


@dataclass(frozen=True)
class Preempt:
    """Handshake: "checkpoint and stop within grace_s". The victim keeps its GPUs until then."""

    job_id: str
    grace_s: float
    reason: PreemptReason
    for_job_id: str


@dataclass(frozen=True)
class Requeue:
    job_id: str
    reason: str = "NodeDown"


@dataclass(frozen=True)
class Reservation:
    """Earliest start a blocked job can count on, from walltime estimates, and where."""

    job_id: str
    t_s: float
    placement: Placement


@dataclass(frozen=True)
class CycleResult:
    starts: tuple[Start, ...] = ()
    preemptions: tuple[Preempt, ...] = ()
    requeues: tuple[Requeue, ...] = ()
    pending_reasons: Mapping[str, Reason] = field(default_factory=dict)
    reservations: Mapping[str, Reservation] = field(default_factory=dict)
    nominated: frozenset[str] = frozenset()
    """Jobs whose victims are stopping: the driver marks them `Job.nominated` for the next
    cycle, which admits them first so the GPUs their victims free go to them."""

    @property
    def started_ids(self) -> set[str]:
        return {s.job_id for s in self.starts}
