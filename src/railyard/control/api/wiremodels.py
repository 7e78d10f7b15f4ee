"""Response models derived from the client's typed dicts (:mod:`railyard.client.wire`), so a
response's shape is written once: the client reads it without pydantic, the server validates
and documents it (OpenAPI) from the same fields, and the use cases build it as a plain dict.

A ``TypedDict`` from :mod:`typing` cannot be a pydantic type on Python 3.11 (pydantic asks
for ``typing_extensions``'s, which the standard-library-only client cannot import), hence a
model made from its annotations. ``tests/control/test_wire.py`` holds every typed dict to the
OpenAPI schema field by field, derived or not.
"""

from __future__ import annotations

import types
import typing
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints

from pydantic import create_model

from railyard.control.schemas import Response

_MADE: dict[type, type[Response]] = {}


def _is_typed_dict(hint: object) -> bool:
    return isinstance(hint, type) and typing.is_typeddict(hint)


def _resolved(hint: Any, names: dict[type, str]) -> Any:
    """``hint`` with every typed dict in it (``list[UsageLine]``, ``X | None``) replaced by
    its model."""
    if _is_typed_dict(hint):
        return model_of(hint, names.get(hint, hint.__name__), names)
    args = get_args(hint)
    if not args:
        return hint
    inner = tuple(_resolved(a, names) for a in args)
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return Union[inner]  # noqa: UP007 (built from a tuple)
    return origin[inner] if len(inner) > 1 else origin[inner[0]]


def model_of(
    view: type, name: str | None = None, names: dict[type, str] | None = None
) -> type[Response]:
    """The response model of the typed dict ``view``, named ``name`` in the OpenAPI schema
    (default: the typed dict's); nested typed dicts are named from ``names``. A
    ``NotRequired`` key is optional with None. Made once per typed dict."""
    if view in _MADE:
        return _MADE[view]
    names = names or {}
    fields: dict[str, Any] = {}
    for key, hint in get_type_hints(view, include_extras=True).items():
        if get_origin(hint) is NotRequired:
            fields[key] = (_resolved(get_args(hint)[0], names), None)
        else:
            fields[key] = (_resolved(hint, names), ...)
    model = create_model(name or view.__name__, __base__=Response, __doc__=view.__doc__,
                         **fields)  # fmt: skip
    _MADE[view] = model
    return model
