"""Who is calling: bearer tokens (random, prefixed, stored only as SHA-256 hashes) and the
user and token services (admin only), kept apart from jobs and queues in ``services``.

A token is ``ry_`` + 32 random bytes (``secrets.token_urlsafe(32)``, 256 bits). The prefix lets
secret scanners and people recognise it (GitHub's token format does the same:
https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/). Slow,
salted hashes (bcrypt, Argon2) exist to stop brute force of low-entropy passwords (OWASP
Password Storage Cheat Sheet); a 256-bit random secret cannot be guessed, so one fast SHA-256
is enough and keeps every request cheap. The lookup is by hash, and the found hash is compared
again in constant time, so response timing never reveals a stored value.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.schemas import Conflict, Forbidden, NotFound, TokenCreate, UserCreate
from railyard.control.tables import EventRow, QueueMember, Token, User

PREFIX = "ry_"


def new_token() -> str:
    """A fresh plaintext token; show it once, store :func:`hash_token` of it."""
    return PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def authenticate(session: Session, token: str) -> User | None:
    """The user a token belongs to, or None for an unknown, malformed or revoked token."""
    if not token.startswith(PREFIX) or len(token) > 128:
        return None
    digest = hash_token(token)
    row = session.scalars(select(Token).where(Token.token_hash == digest)).one_or_none()
    if row is None or row.revoked or not hmac.compare_digest(row.token_hash, digest):
        return None
    return session.get(User, row.user_id)


def _audit(session: Session, now_t_s: float, kind: str, message: str) -> None:
    session.add(EventRow(t_s=now_t_s, job_id=None, kind=kind, message=message))


# -- users and tokens, as services on a Session and the acting user ------------------------------


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
    user = User(name=spec.name, is_admin=spec.is_admin, created_t_s=now_t_s)
    session.add(user)
    session.flush()
    _audit(session, now_t_s, "user", f"{actor.name} added user {spec.name}")
    return user


def list_users(session: Session, actor: User) -> list[tuple[User, list[str]]]:
    """Users with the queues they are members of."""
    require_admin(actor)
    queues: dict[int, list[str]] = defaultdict(list)
    for m in session.scalars(select(QueueMember).order_by(QueueMember.queue)):
        queues[m.user_id].append(m.queue)
    return [(u, queues[u.id]) for u in session.scalars(select(User).order_by(User.id))]


def issue_token(session: Session, user: User, label: str, now_t_s: float) -> tuple[Token, str]:
    """A new token for ``user`` (no permission check: for bootstrap); plaintext returned once."""
    plaintext = new_token()
    token = Token(
        user_id=user.id,
        token_hash=hash_token(plaintext),
        label=label,
        created_t_s=now_t_s,
        revoked=False,
    )
    session.add(token)
    session.flush()
    return token, plaintext


def bootstrap_admin(session: Session, name: str, now_t_s: float) -> tuple[User, str]:
    """The admin ``railyard up`` creates (or finds) and a fresh token for its client.json."""
    user = session.scalars(select(User).where(User.name == name)).one_or_none()
    if user is None:
        user = User(name=name, is_admin=True, created_t_s=now_t_s)
        session.add(user)
        session.flush()
    _, plaintext = issue_token(session, user, "railyard up", now_t_s)
    return user, plaintext


def create_token(
    session: Session, actor: User, spec: TokenCreate, now_t_s: float
) -> tuple[Token, str]:
    require_admin(actor)
    user = user_by_name(session, spec.user)
    token, plaintext = issue_token(session, user, spec.label, now_t_s)
    message = f"{actor.name} created token {token.id} for {user.name}"
    _audit(session, now_t_s, "token", message)
    return token, plaintext


def list_tokens(session: Session, actor: User) -> list[tuple[Token, str]]:
    require_admin(actor)
    rows = session.execute(select(Token, User.name).join(User).order_by(Token.id))
    return [(t, n) for t, n in rows]


def revoke_token(session: Session, actor: User, token_id: int, now_t_s: float) -> Token:
    require_admin(actor)
    token = session.get(Token, token_id)
    if token is None:
        raise NotFound(f"no token {token_id}")
    token.revoked = True
    _audit(session, now_t_s, "token", f"{actor.name} revoked token {token_id}")
    return token
