"""What a cycle decides. Each decision carries its reason, in Slurm's or Kueue's words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from railyard.sched.model import Placement


class Reason(StrEnum):
    """Why a pending job did not start (the `squeue` reason column)."""

    PRIORITY = "Priority"  # a job ahead of it blocks it (strict order, starving job ahead)
    RESOURCES = "Resources"  # not enough free GPUs of its flavor; may hold a reservation
    QUOTA = "Quota"  # its queue (with borrowing) has no quota left (Slurm: QOSGrpGRES)
    REQ_NODE_NOT_AVAIL = "ReqNodeNotAvail"  # would fit only if drained/down nodes were back
    RESERVATION = "Reservation"  # fits now, but would delay a reserved job (no backfill)
    TOPOLOGY = "Topology"  # enough GPUs, but not within the required topology domain
    FRAGMENTATION = "Fragmentation"  # enough free GPUs in total, not in the gang's shape
    PREEMPTING = "Preempting"  # victims were signalled; waiting for them to stop
    BAD_CONSTRAINTS = "BadConstraints"  # can never run here: unknown queue/flavor, too big


class StartReason(StrEnum):
    FITS = "Fits"
    BACKFILL = "Backfill"  # started ahead of a reserved job without delaying it


class PreemptReason(StrEnum):
    RECLAIM = "Reclaim"  # lender takes back nominal quota the victim's queue borrowed
    PRIORITY = "Priority"  # higher-priority job of the same queue


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

    @property
    def started_ids(self) -> set[str]:
        return {s.job_id for s in self.starts}
