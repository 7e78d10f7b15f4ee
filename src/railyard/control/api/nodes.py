"""Routes of nodes: list with GPUs in use; drain and resume (admins)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from railyard.control import adminschemas as a
from railyard.control.store.tables import User
from railyard.control.usecases import nodes
from railyard.control.usecases.logs import read_log as read_log

if TYPE_CHECKING:
    pass
from railyard.control.api.deps import ContextDep, CurrentUser, NodePath, SessionDep, v1_router

router = v1_router()


@router.get("/nodes")
def list_nodes(session: SessionDep, user: CurrentUser) -> list[a.NodeOut]:
    return nodes.list_nodes(session, user)


def _node(session: Session, user: User, name: str) -> a.NodeOut:
    return next(n for n in nodes.list_nodes(session, user) if n.name == name)


@router.post("/nodes/{name}/drain")
def drain_node(
    name: NodePath, body: a.NodeAction, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> a.NodeOut:
    nodes.drain_node(session, user, name, body.reason, ctx.clock())
    return _node(session, user, name)


@router.post("/nodes/{name}/resume")
def resume_node(
    name: NodePath, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> a.NodeOut:
    nodes.resume_node(session, user, name, ctx.clock())
    return _node(session, user, name)
