"""``/openapi.json`` says what the API does: every error a route can answer, with the one
error model whose ``detail`` is a string; states as enums; bounds on what requests carry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from railyard.control.api.app import create_app
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.tables import JobState

DOCUMENTED = {"400", "401", "403", "404", "409", "422", "503"}


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    state: Path = tmp_path_factory.mktemp("openapi")
    store = Store(sqlite_url(state / "railyard.db"))
    try:
        body: dict[str, Any] = (
            TestClient(create_app(store, wake=lambda: None, state_dir=state))
            .get("/openapi.json")
            .json()
        )
        return body
    finally:
        store.close()


def _ref(schema: dict[str, Any]) -> str:
    return str(schema["content"]["application/json"]["schema"]["$ref"]).rsplit("/", 1)[-1]


def test_every_route_documents_its_errors_with_the_error_model(openapi: dict[str, Any]) -> None:
    routes = [(m, p, op) for p, ops in openapi["paths"].items() for m, op in ops.items()]
    assert len(routes) > 15
    for method, path, op in routes:
        if not path.startswith("/v1/"):
            continue
        responses = op["responses"]
        assert set(responses) >= DOCUMENTED, (method, path)
        assert {_ref(responses[code]) for code in DOCUMENTED} == {"ErrorOut"}, (method, path)
    error = openapi["components"]["schemas"]["ErrorOut"]["properties"]
    assert error["detail"] == {"type": "string", "title": "Detail"}
    assert "HTTPValidationError" not in openapi["components"]["schemas"]
    health = openapi["paths"]["/healthz"]["get"]["responses"]
    assert _ref(health["503"]) == "Health"


def test_states_are_enums_and_bounds_are_stated(openapi: dict[str, Any]) -> None:
    schemas = openapi["components"]["schemas"]
    assert schemas["JobState"]["enum"] == [s.value for s in JobState]
    assert schemas["JobOut"]["properties"]["state"] == {"$ref": "#/components/schemas/JobState"}
    assert "enum" in schemas["NodeState"]
    for model in ("QueueCreate", "QueueUpdate"):
        for quota in ("nominal_gpus", "borrowing_limit_gpus", "lending_limit_gpus"):
            schema = schemas[model]["properties"][quota]
            found = schema.get("additionalProperties") or next(
                s["additionalProperties"] for s in schema["anyOf"] if s.get("type") == "object"
            )
            assert (found["type"], found["minimum"]) == ("integer", 0), (model, quota)
    submit = schemas["JobSubmit"]["properties"]
    command = next(s for s in submit["command"]["anyOf"] if s.get("type") == "array")
    assert (command["maxItems"], command["items"]["maxLength"]) == (4096, 131072)
    assert submit["name"]["maxLength"] == 256
    assert schemas["QueueCreate"]["properties"]["weight"]["maximum"] == 1e6
