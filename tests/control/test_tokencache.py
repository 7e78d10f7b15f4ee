"""The submit path's memory of tokens (``usecases.auth.TokenCache``): kept for its time to
live, never past a token's expiry, and never across a change that committed while a lookup
was reading."""

from __future__ import annotations

from railyard.control.store.tables import User
from railyard.control.usecases.auth import TokenCache

TOKEN = "ry_" + "a" * 43


def _cache(now: list[float], ttl_s: float = 2.0, max_entries: int = 4096) -> TokenCache:
    return TokenCache(ttl_s, max_entries, clock=lambda: now[0])


def test_a_token_is_kept_for_its_time_to_live_only() -> None:
    now = [0.0]
    cache = _cache(now, ttl_s=2.0)
    alice = User(name="alice")
    assert cache.get(TOKEN, 100.0) is None
    cache.put(TOKEN, alice, None, cache.generation)
    assert cache.get(TOKEN, 100.0) is alice
    assert cache.get("ry_" + "b" * 43, 100.0) is None
    now[0] = 2.0
    assert cache.get(TOKEN, 100.0) is None


def test_a_token_past_its_expiry_is_never_served() -> None:
    cache = _cache([0.0])
    cache.put(TOKEN, User(name="alice"), 150.0, cache.generation)
    assert cache.get(TOKEN, 149.9) is not None
    assert cache.get(TOKEN, 150.0) is None


def test_a_lookup_that_began_before_a_change_stores_nothing() -> None:
    """A lookup read the token (valid), then a revocation committed and the API forgot the
    cache, then the lookup stored what it read: that store is refused."""
    cache = _cache([0.0])
    began = cache.generation
    cache.forget()
    cache.put(TOKEN, User(name="alice"), None, began)
    assert cache.get(TOKEN, 0.0) is None
    cache.put(TOKEN, User(name="alice"), None, cache.generation)
    assert cache.get(TOKEN, 0.0) is not None
    cache.forget()
    assert cache.get(TOKEN, 0.0) is None


def test_the_cache_is_bounded() -> None:
    cache = _cache([0.0], max_entries=3)
    for i in range(10):
        cache.put(f"ry_{i:043d}", User(name=f"u{i}"), None, cache.generation)
    kept = [i for i in range(10) if cache.get(f"ry_{i:043d}", 0.0) is not None]
    assert 1 <= len(kept) <= 3
    assert 9 in kept
