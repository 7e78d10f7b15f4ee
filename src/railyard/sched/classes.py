"""Running jobs grouped as victims: by flavor and by the class their preemption policy judges
them on (alike victims get one answer per preemptor, so a search asks once per class).

A driver may keep the classes between cycles (`KeptClasses`, `cache.ClassMemo`): a policy
that says until when a running job's class holds (`victim_class_until`: time slicing's class
moves with the quantum and with each service level crossed) has it judged again only then,
for the same knobs; without one, or for a policy without it, every class is judged afresh.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence, Set
from typing import Protocol

from railyard.sched.decisions import PreemptReason
from railyard.sched.limits import min_runtime_bound_s, queue_time_limits
from railyard.sched.model import RunningJob
from railyard.sched.policies.registry import PreemptContext, PreemptionPolicy
from railyard.sched.victims import Candidate


class VictimClass:
    """Running jobs the policy judges alike as victims, with what each search of a pass
    reads of them made once: their ids, how many sizes they come in, and per reason their
    candidates (time slicing searches for up to 16 jobs a cycle over the same classes)."""

    __slots__ = ("ids", "made", "members", "sizes")

    def __init__(self) -> None:
        self.members: list[RunningJob] = []
        self.ids: set[str] = set()
        self.sizes = 0
        self.made: dict[PreemptReason, list[Candidate]] = {}


class KeptClasses(Protocol):
    """Where a driver keeps running jobs' victim classes between cycles (`cache.ClassMemo`)."""

    def table(
        self, key: Hashable, now_t_s: float, running: int
    ) -> dict[str, tuple[RunningJob, Hashable, float]]: ...


def class_key(policy: PreemptionPolicy, ctx: PreemptContext) -> Hashable:
    """Everything of the cycle a victim's class may read besides the job and the time: the
    policy, its knobs and the queues' time limits."""
    return (policy.name, ctx.priority_preemption_min, ctx.service_levels_gpu_s, ctx.quantum_s,
            ctx.time_slice_by, ctx.starvation_limit_s, ctx.starved_unsliced_s,
            ctx.promotion_wait_ratio, ctx.unsliced_after_s,
            queue_time_limits(ctx.quota.queues))  # fmt: skip


def group_victims(
    running: Sequence[RunningJob],
    signalled: Set[str],
    policy: PreemptionPolicy,
    ctx: PreemptContext,
    kept_classes: KeptClasses | None = None,
) -> dict[str, dict[Hashable, VictimClass]]:
    """flavor -> class -> the running jobs (in `running`'s order) that may be evicted at all:
    not already asked to stop and past their minimum run time (capped by their queue)."""
    out: dict[str, dict[Hashable, VictimClass]] = {}
    bounds: dict[str, float] = {}  # each queue's cap on a job's minimum run time
    now_t_s = ctx.now_t_s
    until_of = getattr(policy, "victim_class_until", None)
    kept = None
    if kept_classes is not None and until_of is not None:
        kept = kept_classes.table(class_key(policy, ctx), now_t_s, len(running))
    victim_class = policy.victim_class
    for r in running:  # up to 73,500 jobs a pass: what the loop reads is bound outside it
        job_id = r.id
        if job_id in signalled:
            continue
        job = r.job
        name = job.queue
        bound = bounds.get(name)
        if bound is None:
            queue = ctx.quota.queues.get(name)
            bound = bounds[name] = min_runtime_bound_s(
                queue.max_min_runtime_s if queue is not None else None
            )
        if now_t_s - r.start_t_s < min(job.min_runtime_s, bound):
            continue
        if kept is None or until_of is None:
            cls = victim_class(r, ctx)
        else:  # a class kept from an earlier cycle while it cannot have changed
            hit = kept.get(job_id)
            if hit is not None and hit[0] is r and now_t_s < hit[2]:
                cls = hit[1]
            else:
                cls, until_t_s = until_of(r, ctx)
                kept[job_id] = (r, cls, until_t_s)
        by_class = out.get(job.flavor)
        if by_class is None:
            by_class = out[job.flavor] = {}
        group = by_class.get(cls)
        if group is None:
            group = by_class[cls] = VictimClass()
        group.members.append(r)
        group.ids.add(job_id)
    for by_class in out.values():
        for group in by_class.values():
            group.sizes = len({r.gpus for r in group.members})
    return out


__all__ = ["KeptClasses", "VictimClass", "class_key", "group_victims"]
