"""Routes of users and tokens (admins), and ``whoami`` for anyone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Path as PathParam

from railyard.client.bounds import (
    INT32_MAX,
)
from railyard.control import adminschemas as a
from railyard.control.store.tables import User
from railyard.control.usecases import queues, users
from railyard.control.usecases.logs import read_log as read_log

if TYPE_CHECKING:
    pass
from railyard.control.api.deps import ContextDep, CurrentUser, SessionDep, v1_router

router = v1_router()


@router.get("/whoami")
def whoami(session: SessionDep, user: CurrentUser) -> a.UserOut:
    mine = sorted(queues.member_queues(session, user))
    return a.UserOut.model_validate({**_fields(user), "queues": mine})


def _fields(row: Any) -> dict[str, Any]:
    return {c: getattr(row, c) for c in row.__table__.columns.keys()}  # noqa: SIM118


@router.get("/users")
def list_users(session: SessionDep, user: CurrentUser) -> list[a.UserOut]:
    return [
        a.UserOut.model_validate({**_fields(u), "queues": q})
        for u, q in users.list_users(session, user)
    ]


@router.post("/users", status_code=201)
def create_user(
    body: a.UserCreate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> a.UserOut:
    if ctx.run_as is not None and user.is_admin:  # a plain user's 403 comes first
        ctx.run_as.require_account(body.name, body.unix_user or body.name)
    return a.UserOut.model_validate(_fields(users.create_user(session, user, body, ctx.clock())))


@router.patch("/users/{name}")
def update_user(
    name: str, body: a.UserUpdate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> a.UserOut:
    """Change a user's Unix account (``unix_user``) or admin flag."""
    if ctx.run_as is not None and user.is_admin and body.unix_user is not None:
        ctx.run_as.require_account(name, body.unix_user)
    changed = users.update_user(session, user, name, body, ctx.clock())
    return a.UserOut.model_validate(_fields(changed))


@router.delete("/users/{name}")
def delete_user(name: str, session: SessionDep, user: CurrentUser, ctx: ContextDep) -> a.UserOut:
    """Remove a user (their tokens and memberships go with them); never the last admin."""
    return a.UserOut.model_validate(_fields(users.delete_user(session, user, name, ctx.clock())))


def _token_out(token: Any, user: str) -> dict[str, Any]:
    return {**_fields(token), "user": user}


@router.get("/tokens")
def list_tokens(session: SessionDep, user: CurrentUser) -> list[a.TokenOut]:
    return [
        a.TokenOut.model_validate(_token_out(t, n)) for t, n in users.list_tokens(session, user)
    ]


@router.post("/tokens", status_code=201)
def create_token(
    body: a.TokenCreate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> a.TokenCreated:
    """A new token for ``body.user``; the plaintext is in this response only."""
    token, plaintext = users.create_token(session, user, body, ctx.clock())
    return a.TokenCreated.model_validate({**_token_out(token, body.user), "token": plaintext})


@router.delete("/tokens/{token_id}")
def revoke_token(
    token_id: Annotated[int, PathParam(ge=1, le=INT32_MAX)],
    session: SessionDep,
    user: CurrentUser,
    ctx: ContextDep,
) -> a.TokenOut:
    token = users.revoke_token(session, user, token_id, ctx.clock())
    owner = session.get(User, token.user_id)
    return a.TokenOut.model_validate(_token_out(token, owner.name if owner else "?"))
