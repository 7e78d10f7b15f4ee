"""The API's error answers: every refusal as :class:`~railyard.control.schemas.ErrorOut` (one
line in ``detail``), and the 413 for a body over the limit; kept apart from the routes
(:mod:`railyard.control.api.app`).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, IntegrityError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from railyard.client.bounds import MAX_REQUEST_BYTES
from railyard.control.api.validation import body_fields, validation_line
from railyard.control.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    ServiceError,
    StorageFull,
    Unavailable,
    describe_failure,
    error_body,
)
from railyard.control.store.retries import RETRY_AFTER_S

log = logging.getLogger("railyard.api")
_STATUS = {
    NotFound: 404,
    Forbidden: 403,
    Conflict: 409,
    Invalid: 422,
    Unavailable: 503,
    StorageFull: 507,
}


def status_of(exc: ServiceError) -> int:
    """The HTTP status of a use-case's refusal."""
    return next((c for t, c in _STATUS.items() if isinstance(exc, t)), 400)


def refusal_response(exc: ServiceError) -> JSONResponse:
    code = status_of(exc)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if isinstance(exc, Unavailable) else None
    body = error_body(exc.line(), field=exc.field, hint=exc.hint)
    return JSONResponse(body, status_code=code, headers=headers)


def install_errors(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def service_error(_: Request, exc: ServiceError) -> JSONResponse:
        return refusal_response(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = body_fields(request.scope.get("endpoint"))
        line, field = validation_line(list(exc.errors()), fields)
        return JSONResponse(error_body(line, field=field), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            error_body(str(exc.detail)), status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(IntegrityError)
    async def conflict(_: Request, exc: IntegrityError) -> JSONResponse:
        line = str(exc.orig).splitlines()[0] if exc.orig else "conflict"
        return JSONResponse(error_body(f"conflict: {line}"), status_code=409)

    @app.exception_handler(DBAPIError)
    async def store_failed(_: Request, exc: DBAPIError) -> JSONResponse:
        refusal = describe_failure(exc) or Unavailable("store error")
        log.error("store: %s", refusal.line())
        return refusal_response(refusal)

    @app.exception_handler(OSError)
    async def disk_failed(_: Request, exc: OSError) -> JSONResponse:
        refusal = describe_failure(exc) or Unavailable(str(exc))
        log.error("disk: %s", refusal.line())
        return refusal_response(refusal)


class BodyLimit:
    """413 for a request body over ``limit`` bytes, by its Content-Length or as it streams."""

    def __init__(self, app: ASGIApp, limit: int = MAX_REQUEST_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"request body over {self.limit} bytes (hint: submit fewer jobs at once)"
        length = dict(scope.get("headers") or ()).get(b"content-length", b"0")
        if length.isdigit() and int(length) > self.limit:
            response = JSONResponse(error_body(too_large), status_code=413)
            await response(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, too_large)
            return message

        await self.app(scope, limited, send)
