"""``railyard queue --start`` (squeue --start): the twin on the live state says when each of
the caller's pending jobs should start; another user's pending jobs are not shown."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow
from railyard.sched import SchedulerConfig
from railyard.web.whatif import twin


@pytest.fixture
def clients(store: Store, tokens: dict[str, str], tmp_path: Path) -> dict[str, TestClient]:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, whatif=twin(SchedulerConfig()))
    return {n: TestClient(app, headers={"Authorization": f"Bearer {t}"}) for n, t in tokens.items()}


def test_pending_jobs_start_when_the_running_ones_end(
    store: Store, clients: dict[str, TestClient]
) -> None:
    alice, bob = clients["alice"], clients["bob"]
    # default's quota is 8 GPUs: the next 8-GPU job of default waits for this one's end
    [running] = alice.post("/v1/jobs", json={"command": ["x"], "gpus": 8, "time": "10"}).json()
    with store.session() as session:
        row = session.get_one(JobRow, running["id"])
        row.state, row.start_t_s, row.placement = "running", time.time(), {"n01": list(range(8))}
    [waiting] = alice.post("/v1/jobs", json={"command": ["x"], "gpus": 8, "time": "20"}).json()
    [theirs] = bob.post("/v1/jobs", json={"command": ["x"], "gpus": 16, "time": "5"}).json()
    [cpu] = alice.post("/v1/jobs", json={"command": ["x"], "gpus": 0}).json()
    before = time.time()
    starts = {e["id"]: e for e in alice.get("/v1/whatif/starts").json()}
    assert set(starts) == {waiting["id"], cpu["id"]}  # not bob's
    expected = starts[waiting["id"]]
    assert 590 <= expected["start_in_s"] <= 610  # when the 10-minute job ends
    assert expected["start_t_s"] == pytest.approx(before + expected["start_in_s"], abs=5)
    assert starts[cpu["id"]]["start_in_s"] is None  # the twin simulates GPU jobs only
    assert theirs["id"] in {e["id"] for e in clients["root"].get("/v1/whatif/starts").json()}


def test_test_only_says_when_and_stores_nothing(
    store: Store, clients: dict[str, TestClient]
) -> None:
    """sbatch --test-only: checked as a submit is, simulated behind the pending line, never
    stored; a refusal is the submit's one line."""
    alice = clients["alice"]
    [running] = alice.post("/v1/jobs", json={"command": ["x"], "gpus": 8, "time": "10"}).json()
    with store.session() as session:
        row = session.get_one(JobRow, running["id"])
        row.state, row.start_t_s, row.placement = "running", time.time(), {"n01": list(range(8))}
    answer = alice.post("/v1/whatif/submit", json={"command": ["x"], "gpus": 4, "time": "5"})
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert (found["queue"], found["gpus"]) == ("default", 4)
    assert 590 <= found["start_in_s"] <= 610
    with store.session() as session:
        assert session.query(JobRow).count() == 1  # nothing stored
    refused = alice.post("/v1/whatif/submit", json={"command": ["x"], "gpus": 99})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("gpus: 99 GPUs asked, the cluster has 16")


def test_without_a_twin_the_what_if_is_503_in_one_line(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    alice = TestClient(app, headers={"Authorization": f"Bearer {tokens['alice']}"})
    answer = alice.get("/v1/whatif/starts")
    assert answer.status_code == 503
    assert answer.json()["detail"] == "this server runs no twin (hint: railyard up starts one)"


def test_test_only_takes_no_write_lock(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    """The twin runs for seconds on a big cluster: --test-only must not hold SQLite's write
    lock meanwhile (a submit beside it would wait for it)."""
    seen: list[bool] = []

    def twin_watching(found: object) -> dict[str, float | None]:
        seen.append(store.engine.url.get_backend_name() != "sqlite" or _can_write(store))
        return {}

    app = create_app(store, wake=lambda: None, state_dir=tmp_path, whatif=twin_watching)
    alice = TestClient(app, headers={"Authorization": f"Bearer {tokens['alice']}"})
    answer = alice.post("/v1/whatif/submit", json={"command": ["x"], "gpus": 1})
    assert answer.status_code == 200, answer.text
    assert seen == [True]


def _can_write(store: Store) -> bool:
    """Whether another connection may write now (no one holds SQLite's write lock)."""
    import sqlite3

    path = store.engine.url.database
    assert path is not None
    other = sqlite3.connect(path, timeout=0.2)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()
