"""User and token use-cases (admins), and the admin ``railyard up`` creates on first start.

Tokens themselves (format, hashing, lookup) are :mod:`railyard.control.usecases.auth`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql.selectable import Exists, ScalarSelect, Select

from railyard.control.adminschemas import TokenCreate, UserCreate, UserUpdate
from railyard.control.errors import Conflict, Forbidden, NotFound
from railyard.control.store.effects import record, request_auth_reload
from railyard.control.store.tables import JobRow, QueueMember, Token, User
from railyard.control.usecases.auth import is_valid, issue_token


def require_admin(actor: User) -> None:
    if not actor.is_admin:
        raise Forbidden(f"user {actor.name!r} is not an admin")


def user_by_name(session: Session, name: str) -> User:
    user = session.scalars(select(User).where(User.name == name)).one_or_none()
    if user is None:
        raise NotFound(f"no user {name!r}")
    return user


def create_user(session: Session, actor: User, spec: UserCreate, now_t_s: float) -> User:
    require_admin(actor)
    if session.scalars(select(User).where(User.name == spec.name)).one_or_none():
        raise Conflict(f"user {spec.name!r} exists")
    unix_user = spec.unix_user or spec.name
    user = User(name=spec.name, is_admin=spec.is_admin, unix_user=unix_user, created_t_s=now_t_s)
    session.add(user)
    session.flush()
    message = f"{actor.name} added user {spec.name} (Unix account {unix_user})"
    record(session, now_t_s, "user", message, None)
    return user


def update_user(session: Session, actor: User, name: str, spec: UserUpdate, now_t_s: float) -> User:
    """Change a user's Unix account or admin flag; jobs already submitted keep their account."""
    require_admin(actor)
    user = user_by_name(session, name)
    changes = []
    if spec.unix_user is not None and spec.unix_user != user.unix_user:
        changes.append(f"Unix account {user.unix_user} -> {spec.unix_user}")
        user.unix_user = spec.unix_user
    if spec.is_admin is not None and spec.is_admin != user.is_admin:
        changes.append(f"admin {user.is_admin} -> {spec.is_admin}")
        if spec.is_admin:
            user.is_admin = True
        else:
            _demote(session, user, now_t_s)
    if changes:
        record(session, now_t_s, "user", f"{actor.name} changed {name}: {'; '.join(changes)}", None)
        request_auth_reload(session)
    return user


_LAST_ADMIN_HINT = "make another user an admin first (railyard admin users update USER --admin)"
_NO_TOKEN_HINT = (
    "give another admin a token first (railyard admin tokens create USER): an admin without a "
    "valid token cannot act"
)


def _lock_admins(session: Session) -> None:
    """Lock every admin's row (PostgreSQL; SQLite's write lock is the statement's own), in id
    order, so two admins demoting each other run one after the other and the second sees the
    first's change."""
    session.execute(select(User.id).where(User.is_admin).order_by(User.id).with_for_update())


def _live_token(user_id: Any, now_t_s: float) -> Exists:
    """``user_id`` holds a token that is neither revoked nor expired at ``now_t_s``: the only
    way an admin can act (a dashboard session is made from a token too)."""
    return (
        select(Token.id)
        .where(
            Token.user_id == user_id,
            Token.revoked.is_(False),
            or_(Token.expires_t_s.is_(None), Token.expires_t_s > now_t_s),
        )
        .exists()
    )


def _other_admins(user: User, now_t_s: float) -> ScalarSelect[int]:
    """A count of the admins other than ``user`` who can act, evaluated inside the statement
    that uses it."""
    return _count_other_admins(user, now_t_s).scalar_subquery()


def _count_other_admins(user: User, now_t_s: float) -> Select[int]:
    """Admins other than ``user`` who hold a live token: an admin without one counts for
    nothing, or demoting the only admin with a token would leave no one able to administer."""
    other = aliased(User)
    return (
        select(func.count())
        .select_from(other)
        .where(other.is_admin, other.id != user.id, _live_token(other.id, now_t_s))
    )


def _last_admin(session: Session, user: User) -> Conflict:
    """The refusal: "the last admin", or, where other admins exist but none holds a valid
    token, that they cannot act."""
    others = session.scalar(
        select(func.count()).select_from(User).where(User.is_admin, User.id != user.id)
    )
    if not others:
        return Conflict(f"user {user.name!r} is the last admin", hint=_LAST_ADMIN_HINT)
    return Conflict(
        f"user {user.name!r} is the last admin who holds a valid token ({others} other "
        f"admin{'s' if others != 1 else ''} without one)",
        hint=_NO_TOKEN_HINT,
    )


def _demote(session: Session, user: User, now_t_s: float) -> None:
    """Compare-and-set: take ``user``'s admin flag only while another admin who can act stays
    (409 otherwise), in one statement, so no interleaving of demotions leaves no admin."""
    _lock_admins(session)
    stmt = (
        update(User)
        .where(User.id == user.id, User.is_admin, _other_admins(user, now_t_s) > 0)
        .values(is_admin=False)
        .returning(User.id)
        .execution_options(synchronize_session=False)
    )
    if session.scalars(stmt).first() is None:
        session.refresh(user)
        if user.is_admin:
            raise _last_admin(session, user)
    session.refresh(user)


def delete_user(session: Session, actor: User, name: str, now_t_s: float) -> User:
    """Remove a user with their tokens and queue memberships; never the last admin who can act
    (409), and never a user with jobs in the store (their history names them: 409)."""
    require_admin(actor)
    user = user_by_name(session, name)
    if user.is_admin and not session.scalar(_count_other_admins(user, now_t_s)):
        raise _last_admin(session, user)  # the clearer refusal first
    if session.scalars(select(JobRow.id).where(JobRow.user_id == user.id).limit(1)).first():
        raise Conflict(
            f"user {name!r} has jobs in the store",
            hint="revoke their tokens and remove them from their queues instead",
        )
    _lock_admins(session)
    stmt = delete(User).where(
        User.id == user.id, or_(User.is_admin.is_(False), _other_admins(user, now_t_s) > 0)
    )
    deleted = session.execute(stmt.returning(User.id).execution_options(synchronize_session=False))
    if deleted.first() is None:
        raise _last_admin(session, user)
    session.expunge(user)
    record(session, now_t_s, "user", f"{actor.name} removed user {name}", None)
    request_auth_reload(session)
    return user


def list_users(session: Session, actor: User) -> list[tuple[User, list[str]]]:
    """Users with the queues they are members of."""
    require_admin(actor)
    queues: dict[int, list[str]] = defaultdict(list)
    for m in session.scalars(select(QueueMember).order_by(QueueMember.queue)):
        queues[m.user_id].append(m.queue)
    return [(u, queues[u.id]) for u in session.scalars(select(User).order_by(User.id))]


def bootstrap_admin(
    session: Session, name: str, now_t_s: float, *, unix_user: str | None = None
) -> tuple[User, str]:
    """The admin ``railyard up`` creates (or finds) and a fresh token for its client.json.
    Its jobs run as ``unix_user``: the account that started the server."""
    user = session.scalars(select(User).where(User.name == name)).one_or_none()
    if user is None:
        user = User(name=name, is_admin=True, unix_user=unix_user or name, created_t_s=now_t_s)
        session.add(user)
        session.flush()
    _, plaintext = issue_token(session, user, "railyard up", now_t_s)
    return user, plaintext


def create_token(
    session: Session, actor: User, spec: TokenCreate, now_t_s: float
) -> tuple[Token, str]:
    require_admin(actor)
    user = user_by_name(session, spec.user)
    expires = now_t_s + spec.expires_in_s if spec.expires_in_s is not None else None
    token, plaintext = issue_token(session, user, spec.label, now_t_s, expires_t_s=expires)
    message = f"{actor.name} created token {token.id} for {user.name}"
    record(session, now_t_s, "token", message, None)
    return token, plaintext


def create_token_locally(
    session: Session, name: str, label: str, now_t_s: float, *, expires_t_s: float | None
) -> tuple[Token, str]:
    """A token made by someone with direct access to the store (the server's Unix account):
    the recovery path when no admin token works any more. No API permission applies."""
    user = user_by_name(session, name)
    token, plaintext = issue_token(session, user, label, now_t_s, expires_t_s=expires_t_s)
    record(session, now_t_s, "token", f"token {token.id} for {name} created locally", None)
    return token, plaintext


def restore_admin_locally(session: Session, name: str, now_t_s: float) -> str:
    """Make ``name`` an admin, creating the user (Unix account: the same name) if missing: the
    way back when no admin is left. Only for someone who can open the store directly (root on
    the server's machine); no API permission applies. Returns what it did, in words."""
    user = session.scalars(select(User).where(User.name == name)).one_or_none()
    if user is None:
        session.add(User(name=name, is_admin=True, unix_user=name, created_t_s=now_t_s))
        session.flush()
        done = f"created admin {name!r} (Unix account {name})"
    elif user.is_admin:
        done = f"{name!r} is already an admin"
    else:
        user.is_admin = True
        done = f"made {name!r} an admin again"
    record(session, now_t_s, "user", f"{done}, locally", None)
    return done


def list_tokens(session: Session, actor: User) -> list[tuple[Token, str]]:
    require_admin(actor)
    rows = session.execute(select(Token, User.name).join(User).order_by(Token.id))
    return [(t, n) for t, n in rows]


def revoke_token(session: Session, actor: User, token_id: int, now_t_s: float) -> Token:
    """Revoke a token; never the last valid admin token, which would lock every admin out
    until someone with the server's account ran ``railyard admin tokens create --local``."""
    require_admin(actor)
    token = session.get(Token, token_id)
    if token is None:
        raise NotFound(f"no token {token_id}")
    _lock_admins(session)  # two admins revoking each other's last tokens: one after the other
    if _admin_tokens(session, now_t_s) == {token.id}:
        raise Conflict(
            f"token {token_id} is the last valid admin token: revoking it locks every admin out",
            hint="create another admin token first (railyard admin tokens create ADMIN), "
            "or recover on the server with: railyard admin tokens create --local",
        )
    token.revoked = True
    record(session, now_t_s, "token", f"{actor.name} revoked token {token_id}", None)
    request_auth_reload(session)
    return token


def _admin_tokens(session: Session, now_t_s: float) -> set[int]:
    """Ids of the valid tokens of admins."""
    rows = session.scalars(select(Token).join(User).where(User.is_admin, Token.revoked.is_(False)))
    return {t.id for t in rows if is_valid(t, now_t_s)}
