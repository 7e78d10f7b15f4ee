"""The client's typed dicts name only fields the server's response models send."""

from __future__ import annotations

from typing import NotRequired, get_type_hints

import pytest
from pydantic import BaseModel

from railyard.client import wire
from railyard.control import adminschemas, schemas
from railyard.control.api import accounting

PAIRS = [
    (wire.Job, schemas.JobOut),
    (wire.LogChunk, schemas.LogChunk),
    (wire.Node, adminschemas.NodeOut),
    (wire.Queue, adminschemas.QueueOut),
    (wire.User, adminschemas.UserOut),
    (wire.Token, adminschemas.TokenOut),
    (wire.TokenCreated, adminschemas.TokenCreated),
    (wire.Health, schemas.Health),
    (wire.Report, accounting.ReportOut),
    (wire.UsageLine, accounting.UsageLineOut),
]


@pytest.mark.parametrize(("view", "model"), PAIRS, ids=[m.__name__ for _, m in PAIRS])
def test_required_keys_are_response_fields(view: type, model: type[BaseModel]) -> None:
    required = set(view.__required_keys__)  # type: ignore[attr-defined]
    assert required, view
    assert required <= set(model.model_fields), required - set(model.model_fields)


def test_fields_newer_servers_add_are_optional() -> None:
    hints = get_type_hints(wire.Job, include_extras=True)
    optional = {k for k, v in hints.items() if getattr(v, "__origin__", None) is NotRequired}
    assert optional == set(wire.Job.__optional_keys__)  # type: ignore[attr-defined]
