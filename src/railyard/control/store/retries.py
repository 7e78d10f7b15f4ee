"""A request whose transaction lost a race for the store is run again, never answered 5xx.

SQLite answers "database is locked" when a writer waited out its busy timeout (or its read
snapshot went stale); PostgreSQL aborts one of two transactions to break a deadlock or a
serialization conflict. Either way the transaction was rolled back whole, so the request can
simply run again: :class:`RetryRoute` re-runs the route (body, dependencies, use-case, commit)
a few times with a short, jittered backoff. If the store is still busy the error reaches the
API's handler, which answers 503 with ``Retry-After``: the server's state, not the client's
input.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import Any

from fastapi.routing import APIRoute
from sqlalchemy.exc import DBAPIError
from starlette.requests import Request
from starlette.responses import Response

from railyard.control.errors import is_transient

ATTEMPTS = 3  # runs of one request in all
BACKOFF_S = (0.05, 0.2)  # before the second and third run, each times a jitter of 0.5-1.5
RETRY_AFTER_S = 1  # what a 503 for a busy store tells the client to wait
# where FastAPI keeps the exit stack of a request's function-scoped dependencies (an internal
# name: tests/control/test_store_busy.py fails if a FastAPI upgrade moves it)
_FUNCTION_STACK = "fastapi_function_astack"

log = logging.getLogger("railyard.api")


async def _one_run(
    handler: Callable[[Request], Coroutine[Any, Any, Response]], request: Request
) -> Response:
    """One run of the route with its own exit stack for the request's function-scoped
    dependencies (FastAPI keeps it in ``scope["fastapi_function_astack"]``), so the store
    session of a failed run is rolled back, and its lock let go, before the next run, and a
    failure to commit is caught here too."""
    outer = request.scope.get(_FUNCTION_STACK)
    try:
        async with AsyncExitStack() as stack:
            request.scope[_FUNCTION_STACK] = stack
            return await handler(request)
    finally:
        request.scope[_FUNCTION_STACK] = outer


class RetryRoute(APIRoute):
    """An ``APIRoute`` whose handler is re-run after a transient store failure."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def retrying(request: Request) -> Response:
            for attempt in range(ATTEMPTS):
                try:
                    return await _one_run(handler, request)
                except DBAPIError as exc:
                    if attempt == ATTEMPTS - 1 or not is_transient(exc):
                        raise
                    log.info("store busy (%s): running %s again", exc.orig, request.url.path)
                    await asyncio.sleep(BACKOFF_S[attempt] * random.uniform(0.5, 1.5))
            raise AssertionError("unreachable")

        return retrying
