"""What orders the pending jobs, as Slurm users ask ``sprio`` and ``sshare``.

railyard orders pending jobs by the loop's ordering policy (`sched.policies.ordering`), not
by a weighted sum: under ``fairshare`` (the default) by priority (the job's class less its
nice), then Slurm's fair tree (level by level from the root, a queue's share of its siblings'
decayed usage over its share of their weights, then the user's share of the leaf queue's usage
over an equal share; lower goes first), then arrival; ``priority`` drops the fair tree,
``fifo`` keeps arrival alone. Before any of it, a job waiting longer than the starvation
limit goes first. These views compute those same keys from the store (the usage the loop last
saved), so ``sprio`` shows the factors that decide and ``sshare`` the fair tree's figures, in
sshare's names (RawShares, NormShares, RawUsage, EffectvUsage, LevelFS, FairShare).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.client.wire import JobPriority, Priorities, Share
from railyard.control.store.tables import JobRow, JobState, QueueRow, UsageRow, User
from railyard.control.usecases.queues import member_queues, path
from railyard.sched.config import SchedulerConfig

__all__ = ["JobPriority", "Priorities", "Share", "priorities", "shares"]  # the wire's shapes

KEYED = ("fifo", "priority", "fairshare")
"""The orderings whose keys these views can say; the others (las, max-min, finish-time)
order by what the cycle measures as it runs."""


@dataclass(frozen=True)
class FairTree:
    """The fair tree's figures: per queue its parent, weight and decayed usage; per (leaf
    queue, user) the user's decayed usage there."""

    parents: dict[str, str | None]
    weights: dict[str, float]
    queue_gpu_s: dict[str, float]
    user_gpu_s: dict[tuple[str, str], float]

    def siblings(self, queue: str) -> list[str]:
        return [n for n, p in self.parents.items() if p == self.parents[queue]]

    def norm_shares(self, queue: str) -> float:
        """Its weight over its siblings' (sshare's NormShares, level by level)."""
        return self.weights[queue] / sum(self.weights[n] for n in self.siblings(queue))

    def effective_usage(self, queue: str) -> float:
        """Its usage over its siblings' (sshare's EffectvUsage); 0 where none used any."""
        total = sum(self.queue_gpu_s.get(n, 0.0) for n in self.siblings(queue))
        return self.queue_gpu_s.get(queue, 0.0) / total if total > 0 else 0.0

    def users(self, queue: str, pending: set[tuple[str, str]]) -> list[str]:
        """The leaf queue's known users, as the ordering counts them: those with usage there
        and those with pending jobs there."""
        known = {u for q, u in self.user_gpu_s if q == queue}
        return sorted(known | {u for q, u in pending if q == queue})

    def user_usage(self, queue: str, user: str, pending: set[tuple[str, str]]) -> float:
        """The user's share of the queue's users' usage (0 where none used any)."""
        total = sum(self.user_gpu_s.get((queue, u), 0.0) for u in self.users(queue, pending))
        return self.user_gpu_s.get((queue, user), 0.0) / total if total > 0 else 0.0

    def key(self, queue: str, user: str, pending: set[tuple[str, str]]) -> tuple[float, ...]:
        """The fair-tree tuple the ordering sorts by (`ordering.queue_levels`, `user_levels`):
        usage share over weight share at each level of the queue's path, then the user's."""
        levels = [self.effective_usage(q) / self.norm_shares(q) for q in path(self.parents, queue)]
        count = len(self.users(queue, pending))
        return (*levels, self.user_usage(queue, user, pending) * count)


def fair_tree(session: Session) -> FairTree:
    rows = list(session.execute(select(QueueRow.name, QueueRow.parent, QueueRow.weight)))
    usage = {key: gpu_s for key, gpu_s in session.execute(select(UsageRow.key, UsageRow.gpu_s))}
    users: dict[tuple[str, str], float] = {}
    for key, gpu_s in usage.items():
        if key.startswith("user:"):
            queue, _, user = key.removeprefix("user:").rpartition("/")
            users[queue, user] = gpu_s
    return FairTree(
        parents={name: parent for name, parent, _ in rows},
        weights={name: weight for name, _, weight in rows},
        queue_gpu_s={name: usage.get(f"queue:{name}", 0.0) for name, _, _ in rows},
        user_gpu_s=users,
    )


def _keys(ordering: str) -> list[str]:
    return {
        "fifo": ["starving", "age"],
        "priority": ["starving", "priority", "age"],
        "fairshare": ["starving", "priority", "fair_share", "age"],
    }.get(ordering, [])


def priorities(
    session: Session, actor: User, ordering: str, now_t_s: float,
    starvation_limit_s: float | None = None,
) -> Priorities:  # fmt: skip
    """Every pending job's factors and place (``sprio``); a plain user sees their own jobs'
    lines (and each one's place among everyone's), an admin everyone's. ``starvation_limit_s``
    is the loop's (None: the scheduler's default; infinite: no job starves)."""
    limit_s = SchedulerConfig().starvation_limit_s if starvation_limit_s is None else (
        starvation_limit_s)  # fmt: skip
    rows = session.execute(
        select(JobRow.id, JobRow.queue, JobRow.user_id, JobRow.priority, JobRow.nice,
               JobRow.submit_t_s, JobRow.hold, User.name)
        .join(User, User.id == JobRow.user_id)
        .where(JobRow.state == JobState.PENDING.value)
    ).all()  # fmt: skip
    tree = fair_tree(session)
    pending = {(r.queue, r.name) for r in rows}
    keys = {p: tree.key(*p, pending) for p in pending} if ordering == "fairshare" else {}

    def sort_key(r: Any) -> tuple[Any, ...]:
        starving = now_t_s - r.submit_t_s >= limit_s
        arrival = (r.submit_t_s, len(r.id), r.id)
        if ordering == "fifo":
            return (not starving, *arrival)
        if ordering == "priority":
            return (not starving, -r.priority, *arrival)
        return (not starving, -r.priority, keys[r.queue, r.name], *arrival)

    runnable = sorted((r for r in rows if r.hold is None), key=sort_key)
    place = {r.id: i + 1 for i, r in enumerate(runnable)} if ordering in KEYED else {}
    shown = sorted(
        (r for r in rows if actor.is_admin or r.user_id == actor.id),
        key=lambda r: (place.get(r.id, math.inf), r.submit_t_s, r.id),
    )
    jobs = [
        JobPriority(
            id=r.id, queue=r.queue, user=r.name, order=place.get(r.id),
            starving=now_t_s - r.submit_t_s >= limit_s, priority=r.priority, nice=r.nice,
            fair_share=list(tree.key(r.queue, r.name, pending)), age_s=now_t_s - r.submit_t_s,
        )
        for r in shown
    ]  # fmt: skip
    limit = limit_s if math.isfinite(limit_s) else None
    factors = [k for k in _keys(ordering) if limit is not None or k != "starving"]
    return Priorities(ordering=ordering, keys=factors, starvation_limit_s=limit, jobs=jobs)


def shares(session: Session, actor: User) -> list[Share]:
    """The fair tree's figures, depth first (``sshare -a``). A plain user sees the queues on
    their queues' paths and below them, and their own user lines; an admin everything. A
    user's FairShare is their rank in the fair tree's order over every user line, as Slurm's
    fair tree gives it ((count - rank) / count)."""
    tree = fair_tree(session)
    pending = {
        (q, u)
        for q, u in session.execute(
            select(JobRow.queue, User.name)
            .join(User, User.id == JobRow.user_id)
            .where(JobRow.state == JobState.PENDING.value)
            .distinct()
        )
    }
    children: dict[str | None, list[str]] = {}
    for name, parent in sorted(tree.parents.items()):
        children.setdefault(parent, []).append(name)
    pairs = sorted({(q, u) for q in tree.parents for u in tree.users(q, pending)
                    if q not in children})  # fmt: skip
    ranked = sorted(pairs, key=lambda p: (tree.key(p[0], p[1], pending), p))
    fair = {p: (len(ranked) - i) / len(ranked) for i, p in enumerate(ranked)}
    visible = _visible_queues(session, actor, tree)
    out: list[Share] = []

    def walk(parent: str | None, depth: int) -> None:
        for name in children.get(parent, []):
            if name in visible:
                norm, eff = tree.norm_shares(name), tree.effective_usage(name)
                out.append(Share(queue=name, user="", depth=depth,
                                 raw_shares=tree.weights[name], norm_shares=norm,
                                 raw_usage_gpu_s=tree.queue_gpu_s.get(name, 0.0),
                                 effective_usage=eff, level_fs=_level(norm, eff),
                                 fair_share=None))  # fmt: skip
                for user in tree.users(name, pending) if name not in children else []:
                    if actor.is_admin or user == actor.name:
                        out.append(_user_share(tree, name, user, depth + 1, pending, fair))
            walk(name, depth + 1)

    walk(None, 0)
    return out


def _visible_queues(session: Session, actor: User, tree: FairTree) -> set[str]:
    if actor.is_admin:
        return set(tree.parents)
    mine = member_queues(session, actor)
    return {n for n in tree.parents if mine.intersection(path(tree.parents, n))}


def _level(norm: float, effective: float) -> float | None:
    """sshare's LevelFS; None for no usage (sshare's ``inf``: JSON has no infinity)."""
    return norm / effective if effective > 0 else None


def _user_share(
    tree: FairTree, queue: str, user: str, depth: int, pending: set[tuple[str, str]],
    fair: dict[tuple[str, str], float],
) -> Share:  # fmt: skip
    norm = 1 / len(tree.users(queue, pending))
    eff = tree.user_usage(queue, user, pending)
    return Share(queue=queue, user=user, depth=depth, raw_shares=1.0, norm_shares=norm,
                 raw_usage_gpu_s=tree.user_gpu_s.get((queue, user), 0.0), effective_usage=eff,
                 level_fs=_level(norm, eff), fair_share=fair.get((queue, user)))  # fmt: skip
