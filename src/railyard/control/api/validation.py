"""One line for a request pydantic refused: the field, what is wrong and a hint (the 422's
``detail``), from pydantic's first error."""

from __future__ import annotations

import difflib
import re
import typing
from typing import Any

from railyard.control.schemas import Request

_REQUEST_FIELDS = sorted(
    {f for m in Request.__subclasses__() for f in m.model_fields} | {"user", "token"}
)


def body_fields(endpoint: Any) -> list[str] | None:
    """The fields of the request model ``endpoint`` takes as its body, if it takes one."""
    try:
        hints = typing.get_type_hints(endpoint) if endpoint is not None else {}
    except (NameError, TypeError):  # an annotation it cannot resolve: the general hints
        return None
    for annotation in hints.values():
        model = annotation if isinstance(annotation, type) else None
        if model is not None and issubclass(model, Request):
            return sorted(model.model_fields)
    return None


def validation_line(errors: list[Any], fields: list[str] | None = None) -> tuple[str, str | None]:
    """The first pydantic error as ``field: message (hint: ...)``, plus the field name.
    ``fields``: the body's own fields, for the hint to an unknown top-level one."""
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
        name = loc[-1] if loc else ""
        known = fields if fields is not None and len(loc) == 1 else _REQUEST_FIELDS
        others = [f for f in known if f != name]  # another request's field is no help
        close = difflib.get_close_matches(name, others, n=1)
        msg = "unknown field" + (f" (hint: did you mean {close[0]!r}?)" if close else "")
    elif kind == "string_pattern_mismatch":  # pydantic's wording names a regex, not a fix
        pattern = str(first.get("ctx", {}).get("pattern", ""))
        msg = f"{first.get('input')!r} is not allowed here (hint: {pattern_words(pattern)})"
    elif kind in (
        "string_too_long",
        "too_long",
    ):  # pydantic says nothing of how much, or what to do
        most = first.get("ctx", {}).get("max_length")
        given = first.get("input")
        size = f"{len(given):,} " if isinstance(given, str | list | dict) else ""
        unit = "characters" if kind == "string_too_long" else "items"
        msg = f"{size}{unit}, over the {most:,} allowed (hint: make it shorter, or split it)"
    elif first.get("type") == "json_invalid":
        field, msg = None, "request body is not valid JSON"
    more = f" [+{len(errors) - 1} more]" if len(errors) > 1 else ""
    return (f"{field}: {msg}" if field else msg) + more, field


_CLASS_WORDS = (("A-Za-z", "letters"), ("a-zA-Z", "letters"), ("a-z", "lower-case letters"),
                ("A-Z", "upper-case letters"), ("0-9", "digits"))  # fmt: skip


def pattern_words(pattern: str) -> str:
    """A pattern of one character class (``^[A-Za-z0-9_.-]+$``) in words ("letters, digits,
    '_', '.' or '-' only"); any other pattern as itself."""
    one_class = re.fullmatch(r"\^\[([^\]^]+)\][+*]\$", pattern)
    if one_class is None:
        return f"it must match {pattern}"
    chars, words = one_class.group(1), []
    for spelled, word in _CLASS_WORDS:
        if spelled in chars:
            chars = chars.replace(spelled, "", 1)
            words.append(word)
    words += [repr(c) for c in chars.replace("\\", "")]
    return ", ".join(words[:-1]) + f" or {words[-1]} only" if len(words) > 1 else f"{words[0]} only"
