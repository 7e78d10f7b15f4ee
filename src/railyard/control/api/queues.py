"""Routes of queues: the tenancy tree, quotas and members."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from railyard.client import wire
from railyard.control import adminschemas as a
from railyard.control.api.wiremodels import model_of
from railyard.control.store.tables import User
from railyard.control.usecases import priorityviews, queues
from railyard.control.usecases.logs import read_log as read_log

if TYPE_CHECKING:
    pass
from railyard.control.api.deps import (
    ContextDep,
    CurrentUser,
    QueuePath,
    SessionDep,
    UserPath,
    v1_router,
)

router = v1_router()


@router.get("/queues")
def list_queues(session: SessionDep, user: CurrentUser) -> list[a.QueueOut]:
    """The queues the user belongs to and those below them; an admin sees all."""
    return queues.list_queues(session, user)


PrioritiesOut = model_of(wire.Priorities, "Priorities", {wire.JobPriority: "JobPriority"})
ShareOut = model_of(wire.Share)


@router.get("/priorities", response_model=PrioritiesOut)
def priorities(session: SessionDep, user: CurrentUser, ctx: ContextDep) -> wire.Priorities:
    """Pending jobs' ordering factors and places (sprio): the loop's ordering policy's keys."""
    return priorityviews.priorities(
        session, user, ctx.ordering, ctx.clock(), ctx.starvation_limit_s
    )


@router.get("/shares", response_model=list[ShareOut])  # type: ignore[valid-type]
def shares(session: SessionDep, user: CurrentUser) -> list[wire.Share]:
    """The fair tree's figures per queue and user (sshare -a)."""
    return priorityviews.shares(session, user)


def _queue(session: Session, user: User, name: str) -> a.QueueOut:
    return next(q for q in queues.list_queues(session, user) if q.name == name)


@router.post("/queues", status_code=201)
def create_queue(
    body: a.QueueCreate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> a.QueueOut:
    queues.create_queue(session, user, body, ctx.clock())
    return _queue(session, user, body.name)


@router.patch("/queues/{name}")
def update_queue(
    name: QueuePath, body: a.QueueUpdate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> a.QueueOut:
    queues.update_queue(session, user, name, body, ctx.clock())
    return _queue(session, user, name)


@router.post("/queues/{name}/members")
def add_member(
    name: QueuePath, body: a.MemberChange, session: SessionDep, user: CurrentUser
) -> a.QueueOut:
    queues.add_member(session, user, name, body.user)
    return _queue(session, user, name)


@router.delete("/queues/{name}/members/{member}")
def remove_member(
    name: QueuePath, member: UserPath, session: SessionDep, user: CurrentUser
) -> a.QueueOut:
    queues.remove_member(session, user, name, member)
    return _queue(session, user, name)
