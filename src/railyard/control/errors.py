"""Refusals of the control plane's use-cases, each one line with the field and a hint.

The API maps them to status codes (404, 403, 409, 422) and the CLI prints ``line()`` and
exits; they live apart from the schemas so use-cases, the loop and the CLI share them.
"""

from __future__ import annotations

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
    def __init__(self, field: str, message: str, hint: str | None = None) -> None:
        super().__init__(message, field=field, hint=hint)


def error_body(detail: str, **extra: Any) -> dict[str, Any]:
    """Every error the API returns: a one-line ``detail`` plus optional machine fields."""
    return {"detail": detail, **{k: v for k, v in extra.items() if v is not None}}
