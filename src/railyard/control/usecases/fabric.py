"""The fabric map's facts for one viewer: every node with its place in the topology, state and
health, and per GPU the job on it, named only where the viewer may see that job (their own,
or any for an admin); another user's GPU is just "in use"."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.store.tables import HOLDING_STATES, JobRow, NodeRow, User
from railyard.control.usecases.nodes import has_machine


@dataclass(frozen=True)
class GpuCell:
    """One GPU: free (`in_use` False), or held by `job_id` (None: another user's job)."""

    in_use: bool
    job_id: str | None = None


@dataclass(frozen=True)
class NodeCell:
    name: str
    state: str
    reason: str
    health: str | None
    path: tuple[str, ...]
    gpus: tuple[GpuCell, ...]
    machine: bool = True  # False: down with no machine behind it (never joined, or left)


@dataclass(frozen=True)
class FabricView:
    nodes: list[NodeCell]  # by name
    focus: str | None  # the picked job, if the viewer may see it
    focus_nodes: frozenset[str]  # the nodes it holds GPUs on


def fabric_view(session: Session, actor: User, focus: str | None) -> FabricView:
    """The map as `actor` may see it; `focus` (a job id) counts only if it is theirs."""
    held: dict[str, dict[int, tuple[str, int]]] = defaultdict(dict)
    rows = session.execute(
        select(JobRow.id, JobRow.user_id, JobRow.placement).where(JobRow.state.in_(HOLDING_STATES))
    )
    for job_id, user_id, placement in rows:
        for node, indices in (placement or {}).items():
            for g in indices:
                held[node][g] = (job_id, user_id)
    cells = []
    for n in session.scalars(select(NodeRow).order_by(NodeRow.name)):
        on = held.get(n.name, {})
        cells.append(NodeCell(n.name, n.state, n.reason, n.health, tuple(n.path),
                              tuple(_gpu(on.get(g), actor) for g in range(n.gpus)),
                              has_machine(n.state, n.reason)))  # fmt: skip
    row = session.get(JobRow, focus) if focus else None
    if row is None or (not actor.is_admin and row.user_id != actor.id):
        return FabricView(cells, None, frozenset())
    return FabricView(cells, row.id, frozenset((row.placement or {}).keys()))


def _gpu(job: tuple[str, int] | None, actor: User) -> GpuCell:
    if job is None:
        return GpuCell(False)
    job_id, owner = job
    return GpuCell(True, job_id if actor.is_admin or owner == actor.id else None)
