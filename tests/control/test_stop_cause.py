"""The stop cause is data written with the stop, not parsed from the reason users see.

Before the ``stop_cause`` column (revision 0009) the loop read a CANCELLING row as a time
limit only if its reason was exactly ``TimeLimit``: a reason reworded for display turned a
time limit into a cancel (CANCELLED instead of TIMEOUT). Old stopping rows are back-filled
from the rule the loop used, on SQLite and PostgreSQL."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Engine, MetaData, insert, select, text, update
from tests.control.conftest import fresh_pg_database
from tests.control.loop_helpers import add_job, job, make_loop, seed_cluster, states, step_until
from tests.control.test_migrations import JOB_AT_0001

from railyard.control.store.convert import SCHED_COLUMNS, to_running
from railyard.control.store.database import Store, _alembic_config, make_engine, migrate, sqlite_url
from railyard.control.store.tables import JobRow
from railyard.sched import StopCause

pytestmark = pytest.mark.stores  # a column and its back-fill: both stores in the main tier

PY = sys.executable


def test_a_time_limit_stays_a_time_limit_whatever_its_reason_says(
    store: Store, tmp_path: Path
) -> None:
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    job_id = add_job(store, [PY, "-c", "import time; time.sleep(60)"], walltime_s=0.5)
    step_until(service, lambda: states(store)[job_id] == "cancelling")
    assert job(store, job_id).stop_cause == StopCause.TIME_LIMIT.value
    with store.session() as s:  # the reason is for people: reword it
        s.execute(update(JobRow).where(JobRow.id == job_id).values(reason="Time limit (0.5 s)"))
    step_until(service, lambda: states(store)[job_id] not in ("running", "cancelling"))
    assert states(store)[job_id] == "timeout"


def _stopping(store: Store, job_id: str, **values: object) -> StopCause | None:
    with store.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id).values(**values))
    with store.session() as s:
        row = s.execute(select(*SCHED_COLUMNS).where(JobRow.id == job_id)).one()
    return to_running(row, "alice").stop_cause


def test_the_world_reads_the_stored_cause(store: Store) -> None:
    seed_cluster(store)
    job_id = add_job(store, ["true"], placement={"node0": [0]}, start_t_s=1.0)
    assert _stopping(store, job_id, state="running", stop_cause=None) is None
    cancelling = {"state": "cancelling", "reason": "TimeLimit"}
    assert _stopping(store, job_id, **cancelling, stop_cause="Cancelled") is StopCause.CANCELLED
    assert _stopping(store, job_id, **cancelling, stop_cause="TimeLimit") is StopCause.TIME_LIMIT
    # written by hand without a cause: the state's usual one
    assert _stopping(store, job_id, **cancelling, stop_cause=None) is StopCause.CANCELLED
    preempting = {"state": "preempting", "preempt_for": "7"}
    assert _stopping(store, job_id, **preempting, stop_cause="NodeDown") is StopCause.NODE_DOWN
    assert _stopping(store, job_id, **preempting, stop_cause="bogus") is StopCause.PREEMPTED


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        engine = make_engine(sqlite_url(tmp_path / "old.db"))
        yield engine
        engine.dispose()
        return
    with fresh_pg_database() as url:
        engine = make_engine(url)
        yield engine
        engine.dispose()


OLD_STOPPING = {  # id -> (state, reason, preempt_for, the cause the loop inferred)
    "1": ("cancelling", "TimeLimit", None, "TimeLimit"),
    "2": ("cancelling", "cancelled by alice", None, "Cancelled"),
    "3": ("preempting", "Preempted (Priority for 9)", "9", "Preempted"),
    "4": ("preempting", "NodeDown: node0", "NodeDown", "NodeDown"),
    "5": ("running", "Priority", None, None),
}


def test_old_stopping_rows_are_back_filled(engine: Engine) -> None:
    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0008")
    tables = MetaData()
    tables.reflect(engine)
    with engine.begin() as c:
        c.execute(insert(tables.tables["users"]).values(id=1, name="a", is_admin=False,
                                                        created_t_s=0.0))  # fmt: skip
        c.execute(insert(tables.tables["queues"]).values(
            name="q", nominal_gpus={}, borrowing_limit_gpus={}, lending_limit_gpus={},
            weight=1.0, created_t_s=0.0,
        ))  # fmt: skip
        for job_id, (state, reason, preempt_for, _) in OLD_STOPPING.items():
            values = {**JOB_AT_0001, "id": job_id, "number": int(job_id), "state": state}
            values.update(reason=reason, preempt_for=preempt_for)
            c.execute(insert(tables.tables["jobs"]).values(**values))
    migrate(engine)
    with engine.connect() as c:
        got = {r[0]: r[1] for r in c.execute(text("SELECT id, stop_cause FROM jobs"))}
    assert got == {job_id: cause for job_id, (*_, cause) in OLD_STOPPING.items()}
