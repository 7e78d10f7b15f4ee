"""A busy store never turns into a 5xx, and an array is stored and cancelled in bulk statements.

A transient store failure (SQLite's "database is locked", PostgreSQL's deadlock) is injected at
the driver, where the real one comes from: the request is run again and succeeds, or, if the
store stays busy, the client gets 503 with ``Retry-After``, and nothing is stored either way.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, func, select, text, update
from tests.control.test_api import Api, api  # noqa: F401 - the fixture is used by name

from railyard.control.store.database import Store
from railyard.control.store.tables import EventRow, JobRow

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier


@contextmanager
def _busy_on_job_insert(store: Store, times: int, table: str = "jobs") -> Iterator[list[str]]:
    """Make the next ``times`` INSERTs into ``table`` fail as a busy store does; yields the
    statements that failed. (PostgreSQL's engine is shared by the module's tests.)"""
    failed: list[str] = []
    insert = f"INSERT INTO {table.upper()} "

    def busy(cursor: Any, statement: str, *_: Any) -> bool:
        if statement.lstrip().upper().startswith(insert) and len(failed) < times:
            failed.append(statement)
            if store.is_sqlite:
                raise sqlite3.OperationalError("database is locked")
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        return False

    event.listen(store.engine, "do_execute", busy)
    event.listen(store.engine, "do_executemany", busy)
    try:
        yield failed
    finally:
        event.remove(store.engine, "do_execute", busy)
        event.remove(store.engine, "do_executemany", busy)


def test_a_transient_store_error_is_retried_not_answered(api: Api) -> None:  # noqa: F811
    with _busy_on_job_insert(api.store, times=1) as failed:
        response = api.as_["alice"].post("/v1/jobs", json={"command": ["true"], "array": "0-2"})
    assert response.status_code == 201, response.text
    assert len(failed) == 1
    assert [(j["id"], j["array"]) for j in response.json()] == [("1", "0-2")]
    assert api.jobs_and_counter() == (3, 3)  # the failed run's numbers were rolled back


def test_a_plain_route_is_run_again_after_a_transient_error(api: Api) -> None:  # noqa: F811
    """A submit goes through its own group commit; any other route retries through
    `store/retries.RetryRoute`: the failed run leaves nothing, the second is answered."""
    root = api.as_["root"]
    with _busy_on_job_insert(api.store, times=1, table="queues") as failed:
        response = root.post("/v1/queues", json={"name": "vision"})
    assert response.status_code == 201, response.text
    assert len(failed) == 1
    names = [q["name"] for q in root.get("/v1/queues").json()]
    assert names.count("vision") == 1


def test_a_store_that_stays_busy_is_a_503_with_retry_after(api: Api) -> None:  # noqa: F811
    with _busy_on_job_insert(api.store, times=100) as failed:
        response = api.as_["alice"].post("/v1/jobs", json={"command": ["true"]})
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) >= 1
    assert response.json()["detail"].startswith("store busy: ")
    assert "\n" not in response.json()["detail"]
    assert len(failed) == 3  # run three times in all
    assert api.jobs_and_counter() == (0, None)


def test_sqlite_is_in_wal_mode_and_a_write_session_takes_the_lock_first(
    store: Store,
) -> None:
    if not store.is_sqlite:
        pytest.skip("SQLite's journal and lock")
    database = store.engine.url.database
    assert database is not None
    with store.session() as session:
        assert session.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    other = sqlite3.connect(database, timeout=0)
    try:
        with store.session():  # a read session holds no lock
            other.execute("BEGIN IMMEDIATE")
            other.rollback()
        locked = pytest.raises(sqlite3.OperationalError, match="database is locked")
        with store.session(write=True), locked:  # BEGIN IMMEDIATE before anything is read
            other.execute("BEGIN IMMEDIATE")
    finally:
        other.close()


def test_an_array_is_stored_and_cancelled_with_the_same_rows_and_events(
    api: Api,  # noqa: F811
) -> None:
    assert [j["id"] for j in api.submit("alice", array="0-4%2", command=["true"])] == ["1"]
    jobs = api.as_["alice"].get("/v1/jobs", params={"array": "1"}).json()
    assert [(j["id"], j["task_number"], j["array_index"]) for j in jobs] == [
        ("1_0", 2, 0), ("1_1", 3, 1), ("1_2", 4, 2), ("1_3", 5, 3), ("1_4", 1, 4)
    ]  # fmt: skip
    with api.store.session() as session:  # unset columns are SQL NULL or the table's default
        nulls = session.scalar(
            select(func.count()).where(JobRow.placement.is_(None), JobRow.handle.is_(None))
        )
        assert nulls == 5
        row = session.get(JobRow, "1_3")
        assert row is not None
        assert (row.max_restarts, row.hold, row.command, row.array_max_running) == (
            3, None, ["true"], 2
        )  # fmt: skip
        session.execute(update(JobRow).where(JobRow.id == "1_1").values(state="running"))
    assert api.as_["bob"].delete("/v1/jobs/1").status_code == 404  # not bob's
    response = api.as_["alice"].delete("/v1/jobs/1")
    assert response.status_code == 200, response.text
    states = [(j["id"], j["state"]) for j in response.json()]  # the array, its active tasks
    assert states == [("1", "cancelled"), ("1_1", "cancelling")]
    with api.store.session() as session:
        events = session.execute(
            select(EventRow.job_id, EventRow.kind, EventRow.message).order_by(EventRow.id)
        ).all()
        ended = session.scalars(select(JobRow.end_t_s).where(JobRow.state == "cancelled"))
        assert all(t is not None and t <= time.time() for t in ended)
    assert [e for e in events if e.kind == "submitted"] == [
        (f"1_{i}", "submitted", "alice -> default: 0 GPUs") for i in range(5)
    ]
    assert sorted((e.job_id, e.message) for e in events if e.kind == "cancel") == [
        ("1_0", "alice: -> cancelled"), ("1_1", "alice: -> cancelling"),
        ("1_2", "alice: -> cancelled"), ("1_3", "alice: -> cancelled"),
        ("1_4", "alice: -> cancelled"),
    ]  # fmt: skip
    again = api.as_["alice"].delete("/v1/jobs/1")  # a repeated scancel changes nothing
    assert [j["state"] for j in again.json()] == [s for _, s in states]


def test_sqlite_writers_queue_in_the_process_not_on_sqlites_poll(store: Store) -> None:
    """A second writer waits on the store's gate until the first commits, and only then
    reaches SQLite (whose own wait is a poll that a writer can lose again and again)."""
    if not store.is_sqlite:
        pytest.skip("SQLite's write lock")
    order: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: order.append(a[2].split()[0]))
    event.listen(store.engine, "commit", lambda conn: order.append("COMMIT"))
    first_wrote = threading.Event()

    def second() -> None:
        first_wrote.wait()
        with store.session() as session:
            session.execute(text("INSERT INTO counters (name, value) VALUES ('second', 1)"))

    thread = threading.Thread(target=second)
    thread.start()
    with store.session(write=True) as session:
        session.execute(text("INSERT INTO counters (name, value) VALUES ('first', 1)"))
        first_wrote.set()
        thread.join(timeout=0.5)  # the second writer is blocked meanwhile, wherever it waits
    thread.join()
    assert order == ["BEGIN", "INSERT", "COMMIT", "INSERT", "COMMIT"]
