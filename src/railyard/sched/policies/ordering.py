"""Ordering policies: strict FIFO, priority, and hierarchical fair share (Slurm's fair tree).

Fair share compares, level by level from the root, each queue's share of its siblings' usage
against its share of their weights; the user inside the leaf queue is the last level. A tuple
of these ratios ordered lexicographically is the fair tree's depth-first ranking.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from dataclasses import dataclass

from railyard.sched.policies.registry import (
    ORDERING,
    OrderContext,
    Rank,
    SortKey,
    minus_priority,
)


@dataclass(frozen=True)
class Fifo:
    name: str = "fifo"

    def sort_key(self, ctx: OrderContext) -> SortKey:
        return lambda j: (j.submit_t_s, j.tie)

    def rank(self, ctx: OrderContext) -> Rank | None:
        return None


@dataclass(frozen=True)
class PriorityFirst:
    name: str = "priority"

    def sort_key(self, ctx: OrderContext) -> SortKey:
        return lambda j: (-j.priority, j.submit_t_s, j.tie)

    def rank(self, ctx: OrderContext) -> Rank | None:
        return minus_priority

    def kept_rank(self, ctx: OrderContext) -> tuple[Hashable, Rank]:
        """A priority is the job's own: its rank holds between cycles."""
        return (), minus_priority


def queue_levels(ctx: OrderContext) -> dict[str, tuple[float, ...]]:
    """Per queue: (usage share / weight share) among siblings, for each level of its path."""
    quota = ctx.quota
    used = ctx.usage.queue_gpu_s
    ratio: dict[str, float] = {}
    groups: dict[str | None, list[str]] = {}
    for name, parent in quota.parent.items():
        groups.setdefault(parent, []).append(name)
    for siblings in groups.values():
        total_u = sum(used.get(n, 0.0) for n in siblings)
        total_w = sum(quota.queues[n].weight for n in siblings)
        for n in siblings:
            u_share = used.get(n, 0.0) / total_u if total_u > 0 else 0.0
            ratio[n] = u_share / (quota.queues[n].weight / total_w)
    return {n: tuple(ratio[q] for q in path) for n, path in quota.paths.items()}


def user_levels(
    ctx: OrderContext, pairs: Collection[tuple[str, str]] | None = None
) -> dict[tuple[str, str], float]:
    """Per (leaf queue, user): usage share / equal share among the queue's known users."""
    users: dict[str, set[str]] = {}
    for q, u in ctx.usage.user_gpu_s:
        users.setdefault(q, set()).add(u)
    for q, u in pairs if pairs is not None else {(j.queue, j.user) for j in ctx.pending}:
        users.setdefault(q, set()).add(u)
    out: dict[tuple[str, str], float] = {}
    for q, names in users.items():
        # summed in name order: a set's order depends on how it was filled
        total = sum(ctx.usage.user_gpu_s.get((q, u), 0.0) for u in sorted(names))
        for u in names:
            share = ctx.usage.user_gpu_s.get((q, u), 0.0) / total if total > 0 else 0.0
            out[q, u] = share * len(names)
    return out


@dataclass(frozen=True)
class FairShare:
    name: str = "fairshare"

    def sort_key(self, ctx: OrderContext) -> SortKey:
        rank = self._shares(ctx)
        return lambda j: (-j.priority, rank[j.queue][j.user], j.submit_t_s, j.tie)

    def rank(self, ctx: OrderContext) -> Rank | None:
        rank = self._shares(ctx)
        span = 1 + max((r for users in rank.values() for r in users.values()), default=0)
        return lambda j: -j.priority * span + rank[j.queue][j.user]

    def _shares(self, ctx: OrderContext) -> dict[str, dict[str, int]]:
        """Queue -> user -> the rank of its fair-tree share tuple among the pending jobs'.
        The few distinct tuples are ranked once, so sorting thousands of jobs compares small
        ints instead of nested tuples."""
        pairs = ctx.pending_pairs
        if pairs is None:
            pairs = {(j.queue, j.user) for j in ctx.pending}
        levels = queue_levels(ctx)
        users = user_levels(ctx, pairs)
        shares = {p: (*levels.get(p[0], ()), users.get(p, 0.0)) for p in pairs}
        ranked = sorted(set(shares.values()))
        rank_of = {fs: r for r, fs in enumerate(ranked)}
        rank: dict[str, dict[str, int]] = {}  # queue -> user -> rank: no pair made per job
        for (queue, user), fs in shares.items():
            rank.setdefault(queue, {})[user] = rank_of[fs]
        return rank


ORDERING.add(Fifo())
ORDERING.add(PriorityFirst())
ORDERING.add(FairShare())
