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
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from railyard.control.store.tables import Token, User

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
    user, why, _ = _lookup(session, token, now_t_s)
    return user, why


def _lookup(
    session: Session, token: str, now_t_s: float | None
) -> tuple[User | None, str, float | None]:
    """:func:`identify`, with the token's expiry (for :class:`TokenCache`)."""
    if not token.startswith(PREFIX) or len(token) > 128:
        return None, INVALID, None
    digest = hash_token(token)
    found = session.execute(_BY_HASH, {"digest": digest}).one_or_none()
    if found is None:
        return None, INVALID, None
    user, token_id, stored, revoked, expires_t_s = found
    if revoked or not hmac.compare_digest(stored, digest):
        return None, INVALID, None
    now = time.time() if now_t_s is None else now_t_s
    if expires_t_s is not None and now >= expires_t_s:
        when = datetime.fromtimestamp(expires_t_s, UTC).isoformat(timespec="seconds")
        return None, f"token {token_id} expired at {when} (hint: an admin creates a new one)", None
    return user, "", expires_t_s


# The token and its user in one query, built once: every request runs it (two ORM queries,
# each built anew, were a fifth of a single submit's CPU time, measured with cProfile).
_BY_HASH = (
    select(User, Token.id, Token.token_hash, Token.revoked, Token.expires_t_s)
    .join(Token, Token.user_id == User.id)
    .where(Token.token_hash == bindparam("digest"))
)


class TokenCache:
    """The users of tokens seen in the last ``ttl_s`` seconds, so that a storm of submits does
    not read the same token row for every request (its lookup, with the thread hop it needs,
    was an eighth of the server's CPU per submit at 8 clients).

    It never outlives a change made through this server: a change to a user or a token marks
    its session (``store.effects.request_auth_reload``) and the API calls :meth:`forget` after
    that commit. A lookup that began before such a change cannot store what it read after it
    (:meth:`generation` is taken before the read and checked when storing). A change made
    outside the server (``railyard admin tokens create --local --admin``) is seen within
    ``ttl_s``. Only successful lookups are kept; an expired entry is never served."""

    def __init__(
        self, ttl_s: float = 2.0, max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._generation = 0
        # token digest -> (user, expires_t_s, kept until, by this clock)
        self._entries: dict[str, tuple[User, float | None, float]] = {}

    @property
    def generation(self) -> int:
        return self._generation

    def get(self, token: str, now_t_s: float) -> User | None:
        """The cached user of ``token``, or None (not seen lately, or expired since)."""
        entry = self._entries.get(hash_token(token))
        if entry is None:
            return None
        user, expires_t_s, until = entry
        if self._clock() >= until or (expires_t_s is not None and now_t_s >= expires_t_s):
            return None
        return user

    def put(self, token: str, user: User, expires_t_s: float | None, generation: int) -> None:
        """Keep what a lookup that began at ``generation`` found, unless a change came since."""
        with self._lock:
            if generation != self._generation:
                return
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[hash_token(token)] = (user, expires_t_s, self._clock() + self.ttl_s)

    def forget(self) -> None:
        """After a change to users or tokens has committed."""
        with self._lock:
            self._generation += 1
            self._entries.clear()


def identify_cached(
    session: Session, token: str, cache: TokenCache, now_t_s: float
) -> tuple[User | None, str]:
    """:func:`identify` through ``cache``; ``session`` is read only on a miss."""
    user = cache.get(token, now_t_s)
    if user is not None:
        return user, ""
    generation = cache.generation
    user, why, expires_t_s = _lookup(session, token, now_t_s)
    if user is not None:
        cache.put(token, user, expires_t_s, generation)
    return user, why


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
