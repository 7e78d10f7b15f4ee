"""The queues page: each queue the actor may see (`queues.list_queues` decides which) with its
share of the cluster's fair-share usage and its entitlement. `entitlements` is the one
definition, which ``/metrics`` serves too."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.adminschemas import QueueOut
from railyard.control.store.convert import to_queue
from railyard.control.store.tables import NodeRow, QueueRow, UsageRow, User
from railyard.control.usecases import queues
from railyard.sched.quota import QuotaTree


@dataclass(frozen=True)
class QueueShare:
    queue: QueueOut
    usage_ratio: float  # the queue subtree's decayed GPU-seconds over the top-level queues'
    entitlement: float  # its fair share of the whole cluster


def queue_shares(session: Session, actor: User) -> list[QueueShare]:
    shown = queues.list_queues(session, actor)
    share = entitlements(session.scalars(select(QueueRow)))
    usage = {u.key.removeprefix("queue:"): u.gpu_s for u in session.scalars(
        select(UsageRow).where(UsageRow.key.like("queue:%")))}  # fmt: skip
    total_use = sum(usage.get(k, 0.0) for k in usage if "/" not in k) or 1.0
    return [
        QueueShare(q, usage.get(q.name, 0.0) / total_use, share.get(q.name, 0.0)) for q in shown
    ]


def entitlements(rows: Iterable[QueueRow]) -> dict[str, float]:
    """Per queue, the product over its path of weight / sum of its siblings' weights."""
    tree = QuotaTree([to_queue(q) for q in rows])
    weight = {n: q.weight for n, q in tree.queues.items()}
    siblings: dict[str | None, float] = {}
    for name, parent in tree.parent.items():
        siblings[parent] = siblings.get(parent, 0.0) + weight[name]
    out = {}
    for name, path in sorted(tree.paths.items()):
        share = 1.0
        for q in path:
            share *= weight[q] / siblings[tree.parent[q]]
        out[name] = share
    return out


@dataclass(frozen=True)
class Overcommit:
    """The leaf queues' nominal quotas of a flavor sum to more than the cluster has of it:
    their guarantees cannot all be kept at once."""

    flavor: str
    nominal_gpus: int
    cluster_gpus: int


def overcommitted(session: Session) -> list[Overcommit]:
    """Per flavor, where the leaf queues' (those no queue is under) nominal GPUs exceed the
    cluster's: the queues page flags it, and so do ``/alerts``, ``/healthz``'s checks and
    ``/metrics`` (``railyard_quota_overcommit_gpus``)."""
    rows = session.execute(select(QueueRow.name, QueueRow.parent, QueueRow.nominal_gpus)).all()
    parents = {parent for _, parent, _ in rows if parent}
    nominal: dict[str, int] = {}
    for name, _, quota in rows:
        if name not in parents:
            for flavor, gpus in (quota or {}).items():
                nominal[flavor] = nominal.get(flavor, 0) + int(gpus)
    cluster: dict[str, int] = {}
    for flavor, gpus in session.execute(select(NodeRow.flavor, NodeRow.gpus)):
        cluster[flavor] = cluster.get(flavor, 0) + int(gpus)
    return [Overcommit(f, n, cluster.get(f, 0)) for f, n in sorted(nominal.items())
            if n > cluster.get(f, 0)]  # fmt: skip


def inert_borrowing(found: QueueOut) -> bool:
    """A borrowing limit on a queue with no parent: there is no one to borrow from, so it
    does nothing (the queues page says so rather than show it as if it bound)."""
    return found.parent is None and any(found.borrowing_limit_gpus.values())
