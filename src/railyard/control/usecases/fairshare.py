"""Why a job waits under fair share, in figures (``railyard show``'s ``fair_share``).

The loop orders pending jobs by Slurm's fair tree (`sched.policies.ordering`): level by
level from the root, a queue's share of its siblings' decayed usage over its share of their
weights, then the user's share of the leaf queue's usage over an equal share. A lower ratio
goes first. This reads the same figures from the store (the usage the loop last saved) and
says them in one line, so a job that waits `Priority` behind another queue's shows why.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.store.tables import QueueRow, UsageRow
from railyard.control.usecases.queues import path


def fair_share_line(session: Session, queue: str, user: str) -> str:
    """``queue default: 62.0% of usage for 50.0% of weight (1.24); user alice: ...``."""
    rows = list(session.execute(select(QueueRow.name, QueueRow.parent, QueueRow.weight)))
    parents = {name: parent for name, parent, _ in rows}
    weights = {name: weight for name, _, weight in rows}
    usage = {key: gpu_s for key, gpu_s in session.execute(select(UsageRow.key, UsageRow.gpu_s))}
    used = {name: usage.get(f"queue:{name}", 0.0) for name in parents}
    parts = []
    for name in path(parents, queue):
        siblings = [n for n, p in parents.items() if p == parents[name]]
        total_gpu_s = sum(used[n] for n in siblings)
        weight_share = weights[name] / sum(weights[n] for n in siblings)
        parts.append(_level(f"queue {name}", used[name], total_gpu_s, weight_share))
    prefix = f"user:{queue}/"
    users = {k.removeprefix(prefix): v for k, v in usage.items() if k.startswith(prefix)}
    users.setdefault(user, 0.0)
    parts.append(_level(f"user {user}", users[user], sum(users.values()), 1 / len(users)))
    return "; ".join(parts) + " (lower goes first)"


def _level(what: str, used_gpu_s: float, total_gpu_s: float, weight_share: float) -> str:
    share = used_gpu_s / total_gpu_s if total_gpu_s > 0 else 0.0
    return (
        f"{what}: {share:.1%} of usage for {weight_share:.1%} of weight "
        f"({share / weight_share:.2f})"
    )
