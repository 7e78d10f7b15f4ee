"""Why a job that cannot start now waits, in the words users know (Slurm's, where it has one).

Asked only for jobs that neither started nor preempted. Order of the questions: would it fit
but for GPUs held for jobs ahead of it (`Priority`)? Are its queue's quota, not GPUs, what
stops it (`QOSGrpGRES`)? Too few free GPUs while a job ahead keeps GPUs of its flavor
(`Priority`: it is not next), or too few with none kept (`Resources`: it is next), or GPUs
enough but not the cores or memory beside them, or not on the nodes it names (`Resources`)?
Enough, but not within its required topology domain (`Topology`), or not in its gang's shape
(`Fragmentation`)?
"""

from __future__ import annotations

from railyard.sched.decisions import Reason
from railyard.sched.holds import HoldBook
from railyard.sched.memo import PassMemo
from railyard.sched.model import TopologyMode
from railyard.sched.policies.registry import PlacementPolicy
from railyard.sched.snapshot import Shape, Snapshot


def diagnose(
    snap: Snapshot,
    shape: Shape,
    quota_ok: bool,
    holds: HoldBook,
    placement: PlacementPolicy,
    memo: PassMemo,
    starts: int,
) -> Reason:
    key = (shape, quota_ok, starts, len(holds))
    cached = memo.diagnosed.get(key)
    if cached is not None:
        return cached
    held = holds.held_of(shape.flavor)
    loads = (
        holds.held_loads_of(shape.flavor)
        if (shape.cpus_per_worker or shape.mem_per_worker_mib)
        else ()
    )
    place = placement.place
    with snap.without(held, loads):
        fits_unheld = place(snap, shape) is not None
        if fits_unheld and not quota_ok:
            reason = Reason.QUOTA
        elif fits_unheld:
            reason = Reason.PRIORITY
        elif snap.flavor_free.get(shape.flavor, 0) < shape.gpus:
            # Too few GPUs. Behind a job ranked ahead that already keeps GPUs of this flavor
            # (a reservation, or victims stopping for it) this one is not next: Slurm's
            # Priority, and it stays so while the cluster is full; only the next job, the
            # one that reserves, waits for Resources. Judged by whether GPUs happened to be
            # free at the cycle's end, ten thousand reasons turned over every few cycles.
            reason = Reason.PRIORITY if holds.keeps(shape.flavor) else Reason.RESOURCES
        elif (
            (shape.cpus_per_worker or shape.mem_per_worker_mib)
            and place(snap, shape._replace(cpus_per_worker=0, mem_per_worker_mib=0)) is not None
        ) or (
            shape.picks_nodes
            and place(snap, shape._replace(only_nodes=None, never_nodes=frozenset())) is not None
        ):
            # the cores or memory beside free GPUs, or free GPUs on nodes it does not pick
            # (Slurm's Resources: the nodes it named are busy)
            reason = Reason.RESOURCES
        elif (
            shape.topology is not None
            and shape.topology.mode is TopologyMode.REQUIRED
            and place(snap, shape._replace(topology=None)) is not None
        ):
            reason = Reason.TOPOLOGY
        else:
            reason = Reason.FRAGMENTATION
    memo.diagnosed[key] = reason
    return reason
