"""Refusals of the control plane's use-cases, each one line with the field and a hint.

The API maps them to status codes (404, 403, 409, 422, 503, 507) and the CLI prints
``line()`` and exits; they live apart from the schemas so use-cases, the loop and the CLI
share them. :func:`describe_failure` turns what the store or the disk raised into one of them.
"""

from __future__ import annotations

import errno
from typing import Any


class ServiceError(Exception):
    """A refusal with a one-line reason; ``field`` and ``hint`` help the caller fix it."""

    def __init__(self, message: str, *, field: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.hint = hint

    def line(self) -> str:
        head = f"{self.field}: {self.message}" if self.field else self.message
        return f"{head} (hint: {self.hint})" if self.hint else head


class NotFound(ServiceError):
    pass


class Forbidden(ServiceError):
    pass


class Conflict(ServiceError):
    pass


class Invalid(ServiceError):
    def __init__(self, field: str | None, message: str, hint: str | None = None) -> None:
        super().__init__(message, field=field, hint=hint)


class Unavailable(ServiceError):
    """The store or the state directory cannot serve the request now (503)."""


class StorageFull(ServiceError):
    """No space left where the store or the job files live (507)."""


_FULL = ("database or disk is full", "no space left on device", "could not extend file")
_READ_ONLY = ("readonly database", "read-only", "read only file system")


def describe_failure(exc: BaseException) -> ServiceError | None:
    """One line for a failure of the store (a SQLAlchemy ``DBAPIError``, whose driver error is
    ``exc.orig``) or of the disk (``OSError``); None when it is neither (a bug: 500)."""
    orig = getattr(exc, "orig", None)
    if isinstance(exc, OSError):
        text = f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return StorageFull(f"disk full: {text}", hint="free space in the state directory")
        if exc.errno == errno.EROFS:
            return Unavailable(f"read-only file system: {text}", hint="remount it read-write")
        return Unavailable(f"file system error: {text}")
    if orig is None:
        return None
    text = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    sqlstate = str(getattr(orig, "sqlstate", "") or "")
    lowered = text.lower()
    if sqlstate == "53100" or any(m in lowered for m in _FULL):
        return StorageFull(f"store: disk full: {text}", hint="free space where the store lives")
    if sqlstate.startswith("22") or type(exc).__name__ == "DataError":
        return Invalid(None, f"a value the store cannot hold: {text}")
    if any(m in lowered for m in _READ_ONLY):
        return Unavailable(f"store is read-only: {text}", hint="check the state directory")
    if is_transient(exc):
        return Unavailable(f"store busy: {text}", hint="retry after the Retry-After seconds")
    return Unavailable(f"store unavailable: {text}", hint="check the database server")


# Failures a re-run of the same transaction may not meet again: SQLite's lock (the busy timeout
# ran out, or a snapshot went stale), PostgreSQL's serialization failure, deadlock and lock
# timeout (SQLSTATEs of Appendix A of its manual).
_TRANSIENT_SQLSTATES = {"40001", "40P01", "55P03"}
_TRANSIENT_TEXT = ("database is locked", "database is busy", "database table is locked")


def is_transient(exc: BaseException) -> bool:
    """True for a store failure that says "not now" rather than "never" (lost a race or a lock)."""
    orig = getattr(exc, "orig", None)
    if orig is None:
        return False
    sqlstate = str(getattr(orig, "sqlstate", "") or getattr(orig, "pgcode", "") or "")
    return sqlstate in _TRANSIENT_SQLSTATES or any(t in str(orig).lower() for t in _TRANSIENT_TEXT)


def error_body(detail: str, **extra: Any) -> dict[str, Any]:
    """Every error the API returns: a one-line ``detail`` plus optional machine fields."""
    return {"detail": detail, **{k: v for k, v in extra.items() if v is not None}}
