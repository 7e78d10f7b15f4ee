"""Admission's reads kept across single submits (store/sharedreads.py): the config number the
store's triggers bump, and that no change to queues, members or nodes, by this server or by
anyone writing to the store, is missed by the next submit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.sharedreads import SHARED, SharedReads

pytestmark = pytest.mark.stores  # triggers are written per database

GOOD = {"command": ["true"], "gpus": 1}


def _config(store: Store) -> int:
    with store.session() as session:
        value = session.execute(text("SELECT value FROM counters WHERE name = 'config'")).scalar()
    assert value is not None
    return int(value)


def _elsewhere(store: Store, sql: str) -> None:
    """``sql`` on a connection of its own engine: another process's write, as far as the
    server's engine knows (no event of its own sees it)."""
    other = create_engine(store.url)
    try:
        with other.begin() as connection:
            connection.execute(text(sql))
    finally:
        other.dispose()


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE queues SET max_priority = 100 WHERE name = 'default'",
        "INSERT INTO queues (name, nominal_gpus, borrowing_limit_gpus, lending_limit_gpus, "
        "weight, priority_preemption, is_default, max_priority, created_t_s) "
        "VALUES ('extra', '{}', '{}', '{}', 1.0, false, false, 500, 0)",
        "DELETE FROM queue_members",
        "UPDATE nodes SET state = 'down'",
        "DELETE FROM nodes WHERE name = 'n02'",
    ],
)
def test_every_change_to_queues_members_or_nodes_bumps_the_number(
    store: Store, tokens: dict[str, str], sql: str
) -> None:
    before = _config(store)
    _elsewhere(store, sql)
    assert _config(store) > before


def test_jobs_and_events_leave_the_number_alone(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    alice = TestClient(
        create_app(store, wake=lambda: None, state_dir=tmp_path),
        headers={"Authorization": f"Bearer {tokens['alice']}"},
    )
    before = _config(store)
    for _ in range(3):
        assert alice.post("/v1/jobs", json=GOOD).status_code == 201
    assert _config(store) == before


def test_a_membership_removed_behind_the_servers_back_refuses_the_next_submit(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    """The kept reads said alice may submit to ``default``; a write straight to the store
    (another process) takes that away, and her very next submit is 403."""
    alice = TestClient(
        create_app(store, wake=lambda: None, state_dir=tmp_path),
        headers={"Authorization": f"Bearer {tokens['alice']}"},
    )
    assert alice.post("/v1/jobs", json=GOOD).status_code == 201
    assert alice.post("/v1/jobs", json=GOOD).status_code == 201  # from the kept reads
    _elsewhere(store, "DELETE FROM queue_members")
    refused = alice.post("/v1/jobs", json=GOOD)
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"].startswith("user 'alice' may not submit to queue 'default'")
    # she may use no queue now: the refusal tells her who can change that, and how
    assert refused.json()["detail"].endswith(
        "(hint: an admin adds you to a queue: railyard admin queues members add QUEUE alice)"
    )


def test_a_bound_lowered_through_the_api_holds_from_the_next_submit(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    alice = TestClient(app, headers={"Authorization": f"Bearer {tokens['alice']}"})
    root = TestClient(app, headers={"Authorization": f"Bearer {tokens['root']}"})
    assert alice.post("/v1/jobs", json={**GOOD, "gpus": 16}).status_code == 201
    _elsewhere(store, "DELETE FROM nodes WHERE name = 'n02'")
    too_big = alice.post("/v1/jobs", json={**GOOD, "gpus": 16})
    assert too_big.status_code == 422, too_big.text
    assert "the cluster has 8" in too_big.json()["detail"]
    lowered = root.patch("/v1/queues/default", json={"max_priority": 100})
    assert lowered.status_code == 200, lowered.text
    high = alice.post("/v1/jobs", json={**GOOD, "priority": "normal"})
    assert high.status_code == 403, high.text


def test_reads_are_kept_while_the_number_stands_and_dropped_when_it_moves(
    store: Store, tokens: dict[str, str]
) -> None:
    shared = SharedReads()
    reads: list[str] = []

    def attached_read() -> list[str]:
        from railyard.control.store.bulk import once

        with store.session(write=True) as session:
            shared.attach(session)
            assert session.info[SHARED][0] is session.get_transaction()
            return once(session, "probe", lambda: reads.append("read") or reads)

    attached_read()
    attached_read()
    assert reads == ["read"]
    _elsewhere(store, "UPDATE nodes SET reason = 'x'")
    attached_read()
    assert reads == ["read", "read"]


def test_a_store_without_the_number_reads_every_time(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    """A store emptied by hand (the counter row gone) shares nothing and still admits."""
    _elsewhere(store, "DELETE FROM counters WHERE name = 'config'")
    alice = TestClient(
        create_app(store, wake=lambda: None, state_dir=tmp_path, clock=time.time),
        headers={"Authorization": f"Bearer {tokens['alice']}"},
    )
    assert alice.post("/v1/jobs", json=GOOD).status_code == 201
    _elsewhere(store, "DELETE FROM queue_members")
    assert alice.post("/v1/jobs", json=GOOD).status_code == 403
