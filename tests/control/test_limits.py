"""Input the stores cannot hold or a launch cannot pass is refused with one line (422, or 413
for a body over the limit) and stores nothing, on SQLite and PostgreSQL alike. Every case
here was a 500, or a 201 for a job that could never run, before the limits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from tests.control.loop_helpers import add_job, make_loop, seed_cluster, states, step_until

from railyard.client.bounds import (
    MAX_REQUEST_BYTES,
)
from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.paths import log_path
from railyard.control.store.tables import JobRow, QueueRow

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier


@pytest.fixture
def client(store: Store, tokens: dict[str, str], tmp_path: Path) -> dict[str, TestClient]:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    return {n: TestClient(app, headers={"Authorization": f"Bearer {t}"}) for n, t in tokens.items()}


def _jobs(store: Store) -> int:
    with store.session() as session:
        return session.scalar(select(func.count()).select_from(JobRow)) or 0


BIG = 2**64
BAD_JOBS: list[tuple[dict[str, Any], str]] = [
    ({"priority": BIG}, "priority: "),
    ({"priority": 2**31}, "priority: "),
    ({"priority": str(2**40)}, "priority: "),
    ({"array": "99999999999999999999"}, "array: array index '99999999999999999999' is over"),
    ({"array": "0-3%99999999999"}, "array: bad array limit"),
    ({"gpus": 2**40}, "gpus: "),
    ({"time": "9" * 400}, "time: bad time"),
    ({"time": "99999999"}, "time: time '99999999' is over"),
    ({"signal": "USR1@99999999"}, "signal: signal time @99999999 is over 65535"),
    ({"checkpoint_grace_s": 1e308}, "checkpoint_grace_s: "),
    ({"command": ["echo", "a\x00b"]}, "command.1: contains a NUL byte (hint: remove it)"),
    ({"name": "a\x00"}, "name: contains a NUL byte"),
    ({"env": {"A=B": "1"}}, "env: 'A=B' has '=' in it"),
    ({"env": {"": "1"}}, "env: "),
    ({"env": {"A": "\x00"}}, "env.A: contains a NUL byte"),
    ({"workdir": "/nonexistent/railyard"}, "workdir: no directory '/nonexistent/railyard'"),
    ({"workdir": "relative/dir"}, "workdir: 'relative/dir' is not an absolute path"),
    ({"command": ["x"] * 5000}, "command: 5,000 items, over the 4,096 allowed (hint: "),
    ({"command": ["x" * 200_000]}, "command.0: "),
    ({"command": ["x" * 100_000] * 3}, "command: arguments total over 262144 bytes"),
    ({"env": {f"V{i}": "x" * 1000 for i in range(300)}}, "env: the environment is"),
    ({"command": None, "script": "#" * (2 << 20)}, "script: "),
    ({"queue": "a\x00b"}, "queue: 'a\\x00b' is not a queue name (hint: "),
    ({"flavor": "f" * 65}, "flavor: 65 characters, over the 64 allowed (hint: "),
    ({"begin_t_s": 2e9, "deadline_t_s": 2e9 - 1, "time": 60}, "begin_t_s is not before"),
    ({"deadline_t_s": 2e9}, "deadline_t_s: a deadline needs a time limit, and queue default"),
    # no admin bound set: the default one (an hour), not ten years of immunity
    ({"min_runtime_s": 3e8}, "min_runtime_s: 3e+08 s is above queue default's bound of 3600 s"),
]


@pytest.mark.parametrize(("body", "detail"), BAD_JOBS)
def test_bad_job_is_one_line_and_stores_nothing(
    client: dict[str, TestClient], store: Store, body: dict[str, Any], detail: str
) -> None:
    response = client["alice"].post("/v1/jobs", json={"command": ["true"], **body})
    assert response.status_code == 422, response.text
    line = response.json()["detail"]
    assert line.startswith(detail), line
    assert "\n" not in line
    assert _jobs(store) == 0


def test_lone_surrogate_and_non_finite_numbers(client: dict[str, TestClient], store: Store) -> None:
    """JSON that Python's parser accepts but no store can hold."""
    alice = client["alice"]
    headers = {"Content-Type": "application/json"}
    for raw, field in (
        (b'{"command": ["echo", "\\ud800"]}', "command.1"),
        (b'{"command": ["true"], "min_runtime_s": Infinity}', "min_runtime_s"),
        (b'{"command": ["true"], "checkpoint_grace_s": NaN}', "checkpoint_grace_s"),
    ):
        response = alice.post("/v1/jobs", content=raw, headers=headers)
        assert response.status_code == 422, response.text
        assert response.json()["field"] == field
    assert _jobs(store) == 0


def test_array_tasks_times_their_size_are_bounded(
    client: dict[str, TestClient], store: Store
) -> None:
    body = {"command": ["true", "x" * 100_000], "array": "0-999"}
    response = client["alice"].post("/v1/jobs", json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("command: 1000 tasks x 100006 bytes")
    assert _jobs(store) == 0


def test_body_over_the_limit_is_413(client: dict[str, TestClient], store: Store) -> None:
    body = json.dumps({"command": ["x" * (MAX_REQUEST_BYTES + 1)]})
    response = client["alice"].post(
        "/v1/jobs", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["detail"].startswith("request body over 16777216 bytes")
    assert _jobs(store) == 0


BAD_QUEUES: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/v1/queues", {"name": "q", "weight": 1e308}, "weight: "),
    ("POST", "/v1/queues", {"name": "q", "weight": 5e-324}, "weight: "),
    ("POST", "/v1/queues", {"name": "q", "nominal_gpus": {"H100": -1}}, "nominal_gpus.H100: "),
    ("POST", "/v1/queues", {"name": "q", "nominal_gpus": {"H100": 2**40}}, "nominal_gpus.H100"),
    ("PATCH", "/v1/queues/default", {"weight": 1e308}, "weight: "),
    ("PATCH", "/v1/queues/default", {"nominal_gpus": {"H100": -1}}, "nominal_gpus.H100: "),
    ("PATCH", "/v1/queues/default", {"lending_limit_gpus": {"k": True}}, "lending_limit_gpus.k"),
    ("PATCH", "/v1/queues/default", {"borrowing_limit_gpus": {"k": 1.5}}, "borrowing_limit_gpus"),
    ("PATCH", "/v1/queues/default", {"nominal_gpus": {"k": "3"}}, "nominal_gpus.k: "),
]


@pytest.mark.parametrize(("method", "path", "body", "detail"), BAD_QUEUES)
def test_bad_queue_is_one_line_and_changes_nothing(
    client: dict[str, TestClient],
    store: Store,
    method: str,
    path: str,
    body: dict[str, Any],
    detail: str,
) -> None:
    response = client["root"].request(method, path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(detail)
    with store.session() as session:
        default = session.get(QueueRow, "default")
        assert default is not None
        assert (default.weight, default.lending_limit_gpus) == (1.0, {})
        assert session.get(QueueRow, "q") is None


def test_infinite_weight_in_raw_json_is_refused(client: dict[str, TestClient]) -> None:
    response = client["root"].patch(
        "/v1/queues/default",
        content=b'{"weight": Infinity}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["field"] == "weight"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        (f"/v1/tokens/{2**70}", 422),
        ("/v1/jobs/%00", 404),
        ("/v1/jobs/99999999999999999999", 404),
        ("/v1/queues/a%00b/members/alice", 422),
    ],
)
def test_out_of_range_paths_are_refused_not_500(
    client: dict[str, TestClient], path: str, status: int
) -> None:
    method = "DELETE" if path.startswith(("/v1/tokens", "/v1/queues")) else "GET"
    response = client["root"].request(method, path)
    assert response.status_code == status, response.text
    assert isinstance(response.json()["detail"], str)


def test_log_offsets_past_the_end_or_out_of_range(
    client: dict[str, TestClient], tmp_path: Path
) -> None:
    alice = client["alice"]
    [job] = alice.post("/v1/jobs", json={"command": ["true"]}).json()
    path = log_path(tmp_path / "jobs", job["id"], 0)
    path.parent.mkdir(parents=True)
    path.write_text("hello\n")
    logs = f"/v1/jobs/{job['id']}/logs"
    past = alice.get(logs, params={"offset": 10**12})
    assert past.status_code == 200
    assert (past.json()["text"], past.json()["offset"]) == ("", 6)
    assert alice.get(logs, params={"offset": 2**64}).status_code == 422
    assert alice.get(logs, params={"rank": 2**40}).status_code == 422


def test_queue_filter_with_a_nul_is_refused(client: dict[str, TestClient]) -> None:
    response = client["root"].get("/v1/jobs", params={"queue": "a\x00"})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("queue: 'a\\x00' is not allowed here (hint: ")


@pytest.mark.parametrize("weight", [1e308, 5e-324, float("inf"), float("nan")])
def test_a_stored_weight_out_of_range_does_not_stop_scheduling(
    store: Store, tmp_path: Path, weight: float
) -> None:
    """Rows written before the API bounded weights (or by hand) are clamped by the loop's
    conversion: sibling queues with such weights once raised ZeroDivisionError every cycle."""
    if weight != weight and store.engine.dialect.name == "sqlite":
        pytest.skip("SQLite stores NaN as NULL: it cannot hold this row")
    seed_cluster(store, gpus=2, queues={"default": 1, "other": 1})
    with store.session() as session:
        for name in ("default", "other"):
            row = session.get(QueueRow, name)
            assert row is not None
            row.weight = weight
    loop = make_loop(store, tmp_path, gpus=2)
    job_id = add_job(store, ["true"])
    step_until(loop, lambda: states(store)[job_id] == "completed")
