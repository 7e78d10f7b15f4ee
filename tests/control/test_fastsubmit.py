"""The fast single submit (control/api/fastsubmit.py): its 201 is the route's, byte for byte;
everything it does not finish (unknown token, bad body, refusals, arrays, big bodies) is
answered by the route as before; a caller cancelled while leading a group still stores it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

from railyard.control.api import fastsubmit
from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.usecases.groupcommit import GroupCommit, Pending

GOOD = {"command": ["python", "train.py"], "gpus": 2, "name": "t", "env": {"A": "1"}}


class _Counting:
    """``fastsubmit._ANSWER`` that counts the answers the fast path wrote."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.count = inner, 0

    def dump_json(self, value: Any) -> bytes:
        self.count += 1
        return bytes(self.inner.dump_json(value))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> _Counting:
    counting = _Counting(fastsubmit._ANSWER)
    monkeypatch.setattr(fastsubmit, "_ANSWER", counting)
    return counting


def _client(store: Store, tmp_path: Path, token: str) -> TestClient:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, clock=lambda: 1_000.0)
    return TestClient(app, headers={"Authorization": f"Bearer {token}"})


def test_the_fast_answer_is_the_routes_byte_for_byte(
    store: Store, tokens: dict[str, str], tmp_path: Path, counted: _Counting
) -> None:
    """A token's first submit goes through the route (the token is read and then known);
    the second is the fast path's. The two answers differ only in the job's id."""
    alice = _client(store, tmp_path, tokens["alice"])
    by_route = alice.post("/v1/jobs", json=GOOD)
    assert counted.count == 0
    fast = alice.post("/v1/jobs", json=GOOD)
    assert counted.count == 1
    assert (by_route.status_code, fast.status_code) == (201, 201)
    assert by_route.headers["content-type"] == fast.headers["content-type"]
    renumbered = by_route.content.replace(b'"id":"1"', b'"id":"2"')
    assert fast.content == renumbered.replace(b'"task_number":1,', b'"task_number":2,')
    assert json.loads(fast.content)[0]["id"] == "2"


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ({**GOOD, "gpus": "many"}, 422, "gpus: Input should be a valid integer"),
        ({**GOOD, "queue": "nope"}, 422, "queue: unknown queue 'nope'"),
        ({**GOOD, "queue": "research"}, 403, "user 'alice' may not submit to queue 'research'"),
        ({**GOOD, "priority": 100_000}, 403, "priority 100000 is above what queue"),
    ],
)
def test_what_the_fast_path_does_not_finish_the_route_answers(
    store: Store, tokens: dict[str, str], tmp_path: Path, counted: _Counting,
    body: dict[str, Any], status: int, detail: str,
) -> None:  # fmt: skip
    alice = _client(store, tmp_path, tokens["alice"])
    assert alice.post("/v1/jobs", json=GOOD).status_code == 201  # the token is known now
    answer = alice.post("/v1/jobs", json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["detail"].startswith(detail), answer.json()["detail"]
    assert counted.count == 0
    assert len(alice.get("/v1/jobs").json()) == 1  # nothing more stored


def test_bad_json_an_array_and_a_big_body_go_to_the_route(
    store: Store, tokens: dict[str, str], tmp_path: Path, counted: _Counting
) -> None:
    alice = _client(store, tmp_path, tokens["alice"])
    assert alice.post("/v1/jobs", json=GOOD).status_code == 201
    broken = alice.post(
        "/v1/jobs", content=b'{"command": [', headers={"content-type": "application/json"}
    )
    assert broken.status_code in (400, 422), broken.text
    array = alice.post("/v1/jobs", json={**GOOD, "array": "0-3"})
    assert array.status_code == 201
    assert array.json()[0]["array"] == "0-3"
    big = {**GOOD, "env": {f"V{i}": "x" * 100 for i in range(700)}}  # over 64 KiB
    assert len(json.dumps(big)) > fastsubmit.MAX_FAST_BODY_BYTES
    assert alice.post("/v1/jobs", json=big).status_code == 201
    assert counted.count == 0
    assert alice.post("/v1/jobs", json=GOOD).status_code == 201
    assert counted.count == 1


def test_an_unknown_token_is_the_routes_401(
    store: Store, tokens: dict[str, str], tmp_path: Path, counted: _Counting
) -> None:
    stranger = _client(store, tmp_path, "ry_not-a-token")
    answer = stranger.post("/v1/jobs", json=GOOD)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert counted.count == 0


def test_a_caller_cancelled_while_handed_the_lead_still_stores_its_group() -> None:
    """A sync request leads and blocks; two coroutines queue behind it; the first of them is
    cancelled (its client went away) before the lead passes to it. It must still lead the
    next group, or the second would wait forever."""
    gate = threading.Event()
    groups: list[list[int]] = []

    def store_group(group: list[Pending[int, str]]) -> None:
        groups.append([p.request for p in group])
        if len(groups) == 1:
            gate.wait(10)
        for pending in group:
            pending.result = f"stored {pending.request}"

    commit: GroupCommit[int, str] = GroupCommit(store_group)
    first = threading.Thread(target=commit.run, args=(0,))
    first.start()
    while not groups:
        time.sleep(0.001)

    async def scenario() -> str:
        cancelled = asyncio.create_task(commit.arun(1))
        waiting = asyncio.create_task(commit.arun(2))
        while len(commit._queue) < 2:
            await asyncio.sleep(0.001)
        cancelled.cancel()
        await asyncio.sleep(0)
        gate.set()
        return await asyncio.wait_for(waiting, 10)

    assert asyncio.run(scenario()) == "stored 2"
    first.join(10)
    assert groups == [[0], [1, 2]]
    assert not commit._leading


def _failing_once(app: Any, error: BaseException) -> list[int]:
    """Make the group commit's first ``arun`` raise ``error``; the calls are counted."""
    submits = app.state.railyard.submits
    real, calls = submits.arun, []

    async def arun(request: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return await real(request)

    submits.arun = arun
    return calls


def _operational(message: str) -> OperationalError:
    return OperationalError("INSERT", {}, Exception(message))


def test_a_store_busy_for_a_moment_is_run_again_by_the_route(
    store: Store, tokens: dict[str, str], tmp_path: Path, counted: _Counting
) -> None:
    alice = _client(store, tmp_path, tokens["alice"])
    assert alice.post("/v1/jobs", json=GOOD).status_code == 201
    calls = _failing_once(alice.app, _operational("database is locked"))
    answer = alice.post("/v1/jobs", json=GOOD)
    assert answer.status_code == 201, answer.text
    assert len(calls) == 2  # the fast path's try, then the route's
    assert len(alice.get("/v1/jobs").json()) == 2


def test_a_failure_that_may_have_committed_is_answered_not_run_again(
    store: Store, tokens: dict[str, str], tmp_path: Path, counted: _Counting
) -> None:
    """A store error that is not a lost race (the connection dropped at COMMIT, say) may
    have stored the job: it is answered 503, as the app's handler answers it, and the
    submit is not run a second time (no duplicate job)."""
    alice = _client(store, tmp_path, tokens["alice"])
    assert alice.post("/v1/jobs", json=GOOD).status_code == 201
    calls = _failing_once(alice.app, _operational("server closed the connection"))
    answer = alice.post("/v1/jobs", json=GOOD)
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "1"
    assert len(calls) == 1
