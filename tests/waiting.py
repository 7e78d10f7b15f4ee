"""One way for a test to wait for something to happen: poll a predicate and fail loudly, naming
what it waited for and what `context` says then (a log), when it does not happen in time. The
bound is for a hang, not a speed target: slow machines must still pass."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

DEFAULT_TIMEOUT_S = 60.0


def wait_for(
    predicate: Callable[[], object],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    context: Callable[[], str] | None = None,
    *,
    interval_s: float = 0.1,
) -> None:
    """Return once ``predicate()`` is true; raise AssertionError past ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            name = getattr(predicate, "__qualname__", repr(predicate))
            said = f":\n{context()}" if context is not None else ""
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {name}{said}")
        time.sleep(interval_s)


def waiter(default_timeout_s: float) -> Callable[..., None]:
    """`wait_for` with another default bound, for modules whose waits are all long (Ray)."""

    def wait(
        predicate: Callable[[], object],
        timeout_s: float = default_timeout_s,
        context: Callable[[], str] | None = None,
        *,
        interval_s: float = 0.1,
    ) -> None:
        wait_for(predicate, timeout_s, context, interval_s=interval_s)

    return wait


MAX_LOAD_FACTOR = 10.0


def load_factor() -> float:
    """How much busier this machine is than one runnable process per core (1.0 when idle or
    not busier): a bound for a hang stretched by it still catches a hang, and a loaded
    machine (two test workers and a build on 2 cores) is not taken for one."""
    try:
        load_1min = os.getloadavg()[0]
    except OSError:
        return 1.0
    return min(MAX_LOAD_FACTOR, max(1.0, load_1min / (os.cpu_count() or 1)))


def scaled(timeout_s: float) -> float:
    """``timeout_s`` stretched by :func:`load_factor`, read now."""
    return timeout_s * load_factor()
