"""One shape per response: every typed dict the client reads (`client.wire`) is the server's
OpenAPI schema of that response, field by field and type by type. Most server models are
made from the typed dicts (`control.api.wiremodels`); the rest are written beside them in
`control.schemas`, and this is what keeps the two spellings one."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints

import pytest
from fastapi.testclient import TestClient

from railyard.client import wire
from railyard.control.api.app import create_app
from railyard.control.store.database import Store, sqlite_url

COMPONENT = {
    "Event": "EventOut", "Job": "JobOut", "LogChunk": "LogChunk", "Node": "NodeOut",
    "HealthResult": "HealthResultOut", "HealthRun": "HealthRunOut",
    "HealthReport": "HealthReportOut", "AcrossTest": "AcrossTestOut", "Across": "AcrossOut",
    "Queue": "QueueOut", "User": "UserOut", "Token": "TokenOut", "TokenCreated": "TokenCreated",
    "Health": "Health", "UsageLine": "UsageLineOut", "Report": "ReportOut",
    "SamplePoint": "SamplePointOut", "Samples": "SamplesOut", "JobPriority": "JobPriority",
    "Priorities": "Priorities", "Share": "Share",
}  # fmt: skip
"""Each typed dict's component in ``/openapi.json``."""
CLIENT_ONLY = {("Job", "signal")}
"""Keys the client reads that no server model sends: a job's ``signal`` is what servers
before ``exit_signal`` sent (``cli/history.py`` falls back on it)."""
VIEWS = {n: v for n, v in vars(wire).items() if isinstance(v, type) and typing.is_typeddict(v)}
_JSON = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


@pytest.fixture(scope="module")
def components(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    state: Path = tmp_path_factory.mktemp("wire")
    store = Store(sqlite_url(state / "railyard.db"))
    try:
        app = create_app(store, wake=lambda: None, state_dir=state)
        found: dict[str, Any] = TestClient(app).get("/openapi.json").json()
        return dict(found["components"]["schemas"])
    finally:
        store.close()


def _client_type(hint: Any) -> Any:
    """A type hint as a comparable JSON type: "string", ("array", item), ("object", value),
    a frozenset for a union, ("ref", component) for a nested typed dict."""
    if hint in _JSON:
        return _JSON[hint]
    if typing.is_typeddict(hint):
        return ("ref", COMPONENT[hint.__name__])
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return frozenset(_client_type(a) for a in args)
    if origin is list:
        return ("array", _client_type(args[0]))
    if origin is dict:
        assert args[0] is str, hint
        return ("object", _client_type(args[1]))
    raise AssertionError(f"no JSON type for {hint!r}")


def _server_type(schema: dict[str, Any], components: dict[str, Any]) -> Any:
    if "anyOf" in schema:
        return frozenset(_server_type(s, components) for s in schema["anyOf"])
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        target = components[name]
        return target["type"] if "enum" in target else ("ref", name)  # an enum: its values' type
    if schema.get("type") == "array":
        return ("array", _server_type(schema["items"], components))
    if schema.get("type") == "object":
        return ("object", _server_type(schema["additionalProperties"], components))
    return schema["type"]


def _client_fields(view: type) -> dict[str, Any]:
    fields = {}
    for key, hint in get_type_hints(view, include_extras=True).items():
        inner = get_args(hint)[0] if get_origin(hint) is NotRequired else hint
        fields[key] = _client_type(inner)
    return fields


def test_every_typed_dict_names_its_component() -> None:
    assert set(VIEWS) == set(COMPONENT)


@pytest.mark.parametrize("name", sorted(COMPONENT))
def test_the_client_reads_the_servers_fields_with_its_types(
    name: str, components: dict[str, Any]
) -> None:
    schema = components[COMPONENT[name]]
    server = {k: _server_type(v, components) for k, v in schema["properties"].items()}
    client = {k: v for k, v in _client_fields(VIEWS[name]).items() if (name, k) not in CLIENT_ONLY}
    assert sorted(client) == sorted(server), "the fields differ"
    wrong = {k: (client[k], server[k]) for k in client if client[k] != server[k]}
    assert not wrong, f"(client, server) types differ: {wrong}"


def test_a_key_the_client_requires_is_always_sent() -> None:
    """The server sends each field of its model; a key old servers lack is ``NotRequired``."""
    hints = get_type_hints(wire.Job, include_extras=True)
    optional = {k for k, v in hints.items() if get_origin(v) is NotRequired}
    assert optional == set(wire.Job.__optional_keys__)
    assert "id" in wire.Job.__required_keys__
