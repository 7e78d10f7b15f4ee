"""Dashboard sessions: a login to `/ui` made from a token, kept server-side.

The browser holds only a random id (``secrets.token_urlsafe(32)``, 256 bits); the store holds
its SHA-256 (as for tokens, a fast hash is enough for a random secret), the user and the token
it was made from. The id is never a bearer token (the API looks only at ``tokens``) and the
token never goes into a cookie. A session ends at logout, 12 hours after login, after 2 hours
without a request (OWASP's Session Management Cheat Sheet: absolute and idle timeouts; these
are its upper figures for a low-risk tool used through a working day), and as soon as the token
it was made from is revoked or expires or its user is deleted (checked on every request, the
rows go with the token by foreign key). Expired rows are swept at each login.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from railyard.control.store.effects import record
from railyard.control.store.tables import Token, UiSession, User
from railyard.control.store.transitions import changed_rows
from railyard.control.usecases import auth

ABSOLUTE_S = 12 * 3600.0  # from login, whatever happens
IDLE_S = 2 * 3600.0  # without a request
TOUCH_S = 60.0  # last_seen_t_s is written at most once a minute (pages poll every 2 s)
MAX_ID_CHARS = 64  # token_urlsafe(32) is 43; anything longer is not ours


def hash_id(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def open_session(session: Session, token: str, now_t_s: float) -> tuple[str | None, str]:
    """A new session for a valid ``token``: (its id, ""), or (None, why not)."""
    user, why = auth.identify(session, token, now_t_s)
    if user is None:
        return None, why
    row = session.scalars(select(Token).where(Token.token_hash == auth.hash_token(token))).one()
    sweep(session, now_t_s)
    session_id = secrets.token_urlsafe(32)
    session.add(
        UiSession(
            id_hash=hash_id(session_id),
            user_id=user.id,
            token_id=row.id,
            created_t_s=now_t_s,
            last_seen_t_s=now_t_s,
            expires_t_s=now_t_s + ABSOLUTE_S,
        )
    )
    session.flush()
    record(session, now_t_s, "session", f"{user.name} logged in to the dashboard (token {row.id})",
           None)  # fmt: skip
    return session_id, ""


def current(session: Session, session_id: str, now_t_s: float) -> User | None:
    """The user of a live session, or None (an ended session's row is deleted here)."""
    if not session_id or len(session_id) > MAX_ID_CHARS:
        return None
    digest = hash_id(session_id)
    found = session.execute(
        select(UiSession, Token, User)  # one query: the request pays one round trip
        .join(Token, Token.id == UiSession.token_id)
        .join(User, User.id == UiSession.user_id)
        .where(UiSession.id_hash == digest)
    ).one_or_none()
    if found is None:
        return None
    row, token, user = found
    alive = (
        hmac.compare_digest(row.id_hash, digest)
        and now_t_s < row.expires_t_s
        and now_t_s - row.last_seen_t_s < IDLE_S
        and auth.is_valid(token, now_t_s)
        and token.user_id == user.id
    )
    if not alive:
        session.execute(delete(UiSession).where(UiSession.id_hash == digest))
        return None
    if now_t_s - row.last_seen_t_s >= TOUCH_S:  # compare-and-set: a concurrent touch wins
        session.execute(
            update(UiSession)
            .where(UiSession.id_hash == digest, UiSession.last_seen_t_s == row.last_seen_t_s)
            .values(last_seen_t_s=now_t_s)
            .execution_options(synchronize_session=False)
        )
    return user


def close(session: Session, session_id: str, now_t_s: float) -> bool:
    """End a session (logout); False if it had already ended."""
    if not session_id or len(session_id) > MAX_ID_CHARS:
        return False
    row = session.get(UiSession, hash_id(session_id))
    if row is None:
        return False
    user = session.get(User, row.user_id)
    gone = changed_rows(session, delete(UiSession).where(UiSession.id_hash == row.id_hash))
    if gone:
        record(session, now_t_s, "session", f"{user.name if user else '?'} logged out", None)
    return bool(gone)


def sweep(session: Session, now_t_s: float) -> int:
    """Delete sessions past their limits or whose token no longer works; how many."""
    dead_tokens = select(Token.id).where(or_(Token.revoked.is_(True), Token.expires_t_s <= now_t_s))
    return changed_rows(
        session,
        delete(UiSession)
        .where(
            or_(
                UiSession.expires_t_s <= now_t_s,
                UiSession.last_seen_t_s <= now_t_s - IDLE_S,
                UiSession.token_id.in_(dead_tokens),
            )
        )
        .execution_options(synchronize_session=False),
    )
