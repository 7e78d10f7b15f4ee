"""One line for a request pydantic refused: the field, what is wrong and a hint (the 422's
``detail``), from pydantic's first error."""

from __future__ import annotations

import difflib
from typing import Any

from railyard.control.schemas import Request

_REQUEST_FIELDS = sorted(
    {f for m in Request.__subclasses__() for f in m.model_fields} | {"user", "token"}
)


def validation_line(errors: list[Any]) -> tuple[str, str | None]:
    """The first pydantic error as ``field: message (hint: ...)``, plus the field name."""
    if not errors:
        return "invalid request", None
    first = errors[0]
    where = first.get("loc", ())
    loc = [str(p) for p in where if p not in ("body", "query", "path")]
    if where and where[0] == "query":  # state=a&state=b: name the parameter, not its index
        loc = [p for p in loc if not p.isdigit()]
    if loc and loc[-1] == "[key]":  # a bad key of a map: the message names it, not the path
        loc = loc[:-2]
    field = ".".join(loc) or None
    msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    kind = first.get("type")
    if kind == "enum" and loc:
        expected = str(first.get("ctx", {}).get("expected", "")).replace("'", "")
        msg = f"unknown {loc[-1]} {first.get('input')!r} (hint: one of {expected})"
    elif kind == "missing" and tuple(where) == ("body",):
        field, msg = None, "request body is missing (hint: send a JSON object)"
    elif kind == "extra_forbidden":
        close = difflib.get_close_matches(loc[-1] if loc else "", _REQUEST_FIELDS, n=1)
        msg = "unknown field" + (f" (hint: did you mean {close[0]!r}?)" if close else "")
    elif first.get("type") == "json_invalid":
        field, msg = None, "request body is not valid JSON"
    more = f" [+{len(errors) - 1} more]" if len(errors) > 1 else ""
    return (f"{field}: {msg}" if field else msg) + more, field
