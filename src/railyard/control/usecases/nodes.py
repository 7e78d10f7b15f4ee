"""Node use-cases: list with GPUs in use, drain and resume (admins)."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.adminschemas import NodeOut
from railyard.control.errors import Conflict, NotFound
from railyard.control.store.effects import record, request_wake
from railyard.control.store.tables import HOLDING_STATES, JobRow, NodeRow, User
from railyard.control.usecases.joined import NOT_JOINED, left_reason
from railyard.control.usecases.users import require_admin
from railyard.sched.model import NodeState


def list_nodes(session: Session, actor: User) -> list[NodeOut]:
    used: dict[str, int] = defaultdict(int)
    placements = select(JobRow.placement).where(JobRow.state.in_(HOLDING_STATES))
    for placement in session.scalars(placements):
        for node, gpus in (placement or {}).items():
            used[node] += len(gpus)
    return [
        NodeOut(
            name=n.name,
            flavor=n.flavor,
            gpus=n.gpus,
            gpus_used=used[n.name],
            state=NodeState(n.state),
            reason=n.reason,
            path=n.path,
            health=n.health,
            health_t_s=n.health_t_s,
            features=n.features or [],
            cpus=n.cpu_cores or 0,
            memory_mb=round((n.mem_gb or 0.0) * 1024),
        )
        for n in session.scalars(select(NodeRow).order_by(NodeRow.name))
    ]


def _set_node(
    session: Session, actor: User, name: str, state: NodeState, reason: str, now_t_s: float
) -> NodeRow:
    require_admin(actor)
    node = session.get(NodeRow, name)
    if node is None:
        raise NotFound(f"no node {name!r}")
    node.state, node.reason, node.updated_t_s = state.value, reason, now_t_s
    record(session, now_t_s, state.value, f"{actor.name}: node {name} {reason}".strip(), None)
    request_wake(session)
    return node


def drain_node(session: Session, actor: User, name: str, reason: str, now_t_s: float) -> NodeRow:
    """No new work on the node; running jobs finish (the loop marks it drained when empty)."""
    return _set_node(session, actor, name, NodeState.DRAINING, reason or "drained", now_t_s)


def resume_node(session: Session, actor: User, name: str, now_t_s: float) -> NodeRow:
    """Back to ready, unless no machine is behind the node (never joined, or left): it comes
    up by itself when one joins, and jobs placed on it before would only fail to launch."""
    require_admin(actor)
    node = session.get(NodeRow, name)
    if node is not None and not has_machine(node.state, node.reason):
        raise Conflict(f"node {name} has no live machine ({node.reason}); it comes up when "
                       "one joins", hint=f"railyard join on {name}")  # fmt: skip
    return _set_node(session, actor, name, NodeState.READY, "", now_t_s)


def has_machine(state: str, reason: str) -> bool:
    """False for a node down because no machine is behind it (`control.usecases.joined`)."""
    return not (
        state == NodeState.DOWN.value and (reason == NOT_JOINED or reason.endswith(left_reason("")))
    )
