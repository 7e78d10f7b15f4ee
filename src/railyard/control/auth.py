"""Who is calling: bearer tokens (random, prefixed, stored only as SHA-256 hashes) and the
user and token services (admin only), kept apart from jobs and queues in ``services``.

A token is ``ry_`` + 32 random bytes (``secrets.token_urlsafe(32)``, 256 bits). The prefix lets
secret scanners and people recognise it (GitHub's token format does the same:
https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/). Slow,
salted hashes (bcrypt, Argon2) exist to stop brute force of low-entropy passwords (OWASP
Password Storage Cheat Sheet); a 256-bit random secret cannot be guessed, so one fast SHA-256
is enough and keeps every request cheap. The lookup is by hash, and the found hash is compared
again in constant time, so response timing never reveals a stored value. A token may expire
(``expires_t_s``); an expired one is refused with the time it expired.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.tables import Token, User

PREFIX = "ry_"
INVALID = "invalid or revoked token"


def new_token() -> str:
    """A fresh plaintext token; show it once, store :func:`hash_token` of it."""
    return PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def authenticate(session: Session, token: str, now_t_s: float | None = None) -> User | None:
    """The user a token belongs to, or None for an unknown, malformed, revoked or expired one."""
    return identify(session, token, now_t_s)[0]


def identify(session: Session, token: str, now_t_s: float | None = None) -> tuple[User | None, str]:
    """The token's user, or None and one line saying why not (for the 401)."""
    if not token.startswith(PREFIX) or len(token) > 128:
        return None, INVALID
    digest = hash_token(token)
    row = session.scalars(select(Token).where(Token.token_hash == digest)).one_or_none()
    if row is None or row.revoked or not hmac.compare_digest(row.token_hash, digest):
        return None, INVALID
    now = time.time() if now_t_s is None else now_t_s
    if row.expires_t_s is not None and now >= row.expires_t_s:
        when = datetime.fromtimestamp(row.expires_t_s, UTC).isoformat(timespec="seconds")
        return None, f"token {row.id} expired at {when} (hint: an admin creates a new one)"
    return session.get(User, row.user_id), ""


def is_valid(token: Token, now_t_s: float) -> bool:
    """Not revoked and not expired."""
    return not token.revoked and (token.expires_t_s is None or now_t_s < token.expires_t_s)


def issue_token(
    session: Session,
    user: User,
    label: str,
    now_t_s: float,
    *,
    expires_t_s: float | None = None,
) -> tuple[Token, str]:
    """A new token for ``user`` (no permission check: for bootstrap and local recovery);
    the plaintext is returned once."""
    plaintext = new_token()
    token = Token(
        user_id=user.id,
        token_hash=hash_token(plaintext),
        label=label,
        created_t_s=now_t_s,
        revoked=False,
        expires_t_s=expires_t_s,
    )
    session.add(token)
    session.flush()
    return token, plaintext
