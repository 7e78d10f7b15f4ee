"""The plain single submit, answered without FastAPI's routing and dependency solving.

Under 8 clients, after the store's share was cut (group commit, kept admission reads), most
of a ``POST /v1/jobs``'s server CPU was FastAPI's own path: matching the route among the
others, solving its dependencies, a worker-thread hop per request, validating the answer
again (py-spy, in-process ASGI). :class:`FastSubmit` sits in front of the app and takes
only the common case: a known bearer token (``auth.TokenCache``), a small JSON body that is
a valid :class:`~railyard.control.submission.JobSubmit` of one job, stored by the group commit.
Anything else, and any refusal on the way (an unknown token, a bad body, a 403 or 422 of
admission, a store busy for a moment), goes to the full route with the body it read: nothing
was stored (admission only reads; a transient failure rolled the transaction back), so the
route judges and answers it as it would have, its errors and retries included. Any other
failure of the store or the disk, whose transaction may have committed, is answered here as
the app's handlers answer it (503, 507), never run a second time. The answer is the
route's, byte for byte (``tests/control/test_fastsubmit.py``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import DBAPIError, IntegrityError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from railyard.control import schemas as s
from railyard.control.api.deps import Context
from railyard.control.api.errors import refusal_response
from railyard.control.errors import ServiceError, Unavailable, describe_failure, is_transient
from railyard.control.submission import JobSubmit
from railyard.control.usecases.groupcommit import SubmitRequest

PATH = "/v1/jobs"
MAX_FAST_BODY_BYTES = 64 * 1024  # a single job's body; more (or no length) takes the route
_ANSWER = TypeAdapter(list[s.JobOut])

log = logging.getLogger("railyard.api")


class FastSubmit:
    """ASGI middleware: ``POST /v1/jobs`` of one job by a recently seen token, stored and
    answered here; every other request, and every submit it does not finish, goes on to
    ``app`` unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        ctx: Context = scope["app"].state.railyard
        headers = _headers(scope)
        user = _cached_user(ctx, headers)
        length = headers.get(b"content-length", b"")
        if (
            user is None
            or ctx.submits is None
            or not length.isdigit()
            or int(length) > MAX_FAST_BODY_BYTES
            or not headers.get(b"content-type", b"").startswith(b"application/json")
        ):
            await self.app(scope, receive, send)
            return
        body, more = await _read_body(receive)
        try:
            answer = None if more is not None else await _submit(ctx, user, body)
        except (DBAPIError, OSError) as exc:  # may have committed: not run again
            refusal = describe_failure(exc) or Unavailable("store error")
            log.error("store: %s", refusal.line())
            await refusal_response(refusal)(scope, receive, send)
            return
        if answer is None:
            await self.app(scope, _replay(body, more, receive), send)
            return
        await send({"type": "http.response.start", "status": 201, "headers": [
            (b"content-length", str(len(answer)).encode()),
            (b"content-type", b"application/json"),
        ]})  # fmt: skip
        await send({"type": "http.response.body", "body": answer})


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {k.lower(): v for k, v in scope.get("headers") or ()}


def _cached_user(ctx: Context, headers: dict[bytes, bytes]) -> Any:
    """The user of the request's bearer token if the token cache knows it, else None (the
    route then reads the token, and answers 401 where it must)."""
    scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    if scheme.lower() != "bearer" or not token or ctx.tokens is None:
        return None
    return ctx.tokens.get(token, ctx.clock())


async def _read_body(receive: Receive) -> tuple[bytes, Message | None]:
    """The request's body; and a message that was not body (a disconnect), if one came."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


async def _submit(ctx: Context, user: Any, body: bytes) -> bytes | None:
    """The 201 body, or None for anything the route must judge (nothing was stored)."""
    assert ctx.submits is not None
    try:
        spec = JobSubmit.model_validate(json.loads(body))
    except (ValueError, ValidationError):  # bad JSON or a bad field: the route's 400/422
        return None
    if spec.array is not None:
        return None
    try:
        rows, now_t_s = await ctx.submits.arun(SubmitRequest(user, spec))
    except ServiceError:  # refused by admission, which only reads: the route says why
        return None
    except DBAPIError as exc:
        if is_transient(exc) or isinstance(exc, IntegrityError):  # rolled back whole: the
            return None  # route runs it again (RetryRoute), or answers its 409
        raise
    return _ANSWER.dump_json([s.JobOut.from_submitted(rows, user.name, now_t_s)])


def _replay(body: bytes, more: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that gives the body already read, then what came after it."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        if more is not None:
            return more
        return await receive()

    return replay
