"""Schema upgrades keep rows: a store made at the first revision, with a job in it, reaches
the newest revision (jobs.hold added, NULL for old rows) and back, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Engine, MetaData, insert, inspect, text
from tests.control.conftest import fresh_pg_database

from railyard.control.store.database import (
    _alembic_config,
    current_revision,
    make_engine,
    migrate,
    sqlite_url,
)

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier


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


def _to(engine: Engine, revision: str, *, down: bool = False) -> None:
    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)


JOB_AT_0001 = {
    "id": "1", "number": 1, "user_id": 1, "queue": "q", "name": "old", "state": "pending",
    "reason": "", "command": ["true"], "workdir": "", "env": {}, "flavor": "v", "workers": 1,
    "gpus_per_worker": 1, "priority": 500, "preemptible": False, "min_runtime_s": 0.0,
    "checkpoint_grace_s": 30.0, "preempt_signal": "SIGUSR1", "requeue_on_failure": False,
    "max_restarts": 3, "restart_count": 0, "submit_t_s": 5.0, "updated_t_s": 5.0,
}  # fmt: skip


def test_upgrade_keeps_jobs_and_adds_hold(engine: Engine) -> None:
    _to(engine, "0001")
    tables = MetaData()
    tables.reflect(engine)  # the tables as revision 0001 made them
    with engine.begin() as c:
        c.execute(insert(tables.tables["users"]).values(id=1, name="a", is_admin=False,
                                                        created_t_s=0.0))  # fmt: skip
        c.execute(insert(tables.tables["queues"]).values(
            name="q", nominal_gpus={}, borrowing_limit_gpus={}, lending_limit_gpus={},
            weight=1.0, created_t_s=0.0,
        ))  # fmt: skip
        c.execute(insert(tables.tables["jobs"]).values(**JOB_AT_0001))
    migrate(engine)
    assert "hold" in {c["name"] for c in inspect(engine).get_columns("jobs")}
    with engine.connect() as c:
        assert c.execute(text("SELECT name, hold FROM jobs")).all() == [("old", None)]
    _to(engine, "0001", down=True)
    assert current_revision(engine) == "0001"
    assert "hold" not in {c["name"] for c in inspect(engine).get_columns("jobs")}
    with engine.connect() as c:
        assert c.execute(text("SELECT name FROM jobs")).all() == [("old",)]


def test_accounting_is_backfilled_from_the_jobs_that_ran(engine: Engine) -> None:
    """Revision 0022 cuts an ended job's last attempt at midnight and adds its earlier
    attempts' GPU time (attained_gpu_s) as one attempt ending when the last began."""
    _to(engine, "0021")
    tables = MetaData()
    tables.reflect(engine)
    day = 86400.0 * 20_000  # a UTC midnight
    with engine.begin() as c:
        c.execute(insert(tables.tables["users"]).values(id=1, name="a", is_admin=False,
                                                        created_t_s=0.0))  # fmt: skip
        c.execute(insert(tables.tables["queues"]).values(
            name="q", nominal_gpus={}, borrowing_limit_gpus={}, lending_limit_gpus={},
            weight=1.0, created_t_s=0.0,
        ))  # fmt: skip
        ran = {
            **JOB_AT_0001,
            "state": "completed",
            "gpus_per_worker": 2,
            "restart_count": 1,
            "start_t_s": day - 7200,
            "end_t_s": day + 3600,
            "attained_gpu_s": 7200.0,
        }
        c.execute(insert(tables.tables["jobs"]).values(**ran))  # fmt: skip
        c.execute(insert(tables.tables["jobs"]).values(**{**JOB_AT_0001, "id": "2",
                                                          "number": 2}))  # fmt: skip
    migrate(engine)
    with engine.connect() as c:
        pieces = c.execute(text("SELECT day_t_s, attempt, start_t_s, end_t_s, state, gpus "
                                "FROM attempts ORDER BY start_t_s")).all()  # fmt: skip
        days = c.execute(text("SELECT day_t_s, user_name, queue, gpu_s FROM usage_days "
                              "ORDER BY day_t_s")).all()  # fmt: skip
    assert [tuple(p) for p in pieces] == [
        (day - 86400, 0, day - 3 * 3600, day - 7200, "requeue", 2),  # 7,200 GPU-s on 2 GPUs
        (day - 86400, 1, day - 7200, day, "completed", 2),
        (day, 1, day, day + 3600, "completed", 2),
    ]
    assert [tuple(d) for d in days] == [
        (day - 86400, "a", "q", 7200.0 + 14400.0), (day, "a", "q", 7200.0)
    ]  # fmt: skip


CONFIG_TRIGGERS = (
    "SELECT c.relname, t.tgname, t.tgdeferrable, t.tginitdeferred FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid WHERE t.tgname LIKE '%config%' ORDER BY 1, 2"
)


def test_a_store_made_at_0026_bumps_the_config_number_at_commit() -> None:
    """0026's PostgreSQL triggers bumped the number with each statement (a deadlock in the
    soak); a store made then gets the deferred ones of 0027, and goes back to them."""
    with fresh_pg_database() as url:
        engine = make_engine(url)
        try:
            _to(engine, "0026")
            migrate(engine)
            with engine.connect() as c:
                upgraded = [tuple(r) for r in c.execute(text(CONFIG_TRIGGERS))]
            _to(engine, "0026", down=True)
            with engine.connect() as c:
                downgraded = [tuple(r) for r in c.execute(text(CONFIG_TRIGGERS))]
        finally:
            engine.dispose()
    tables = ("nodes", "queue_members", "queues")
    assert upgraded == [
        row for t in tables for row in ((t, f"{t}_config", True, True),
                                         (t, f"{t}_config_truncate", False, False))
    ]  # fmt: skip
    assert downgraded == [(t, f"{t}_config", False, False) for t in tables]


def test_jobs_stored_before_0035_keep_their_slurm_variables(engine: Engine) -> None:
    """0035 records which option asked GPUs per node and whether --ntasks came alone; a job
    stored before keeps what its launch set: SLURM_GPUS_PER_NODE for GPUs per node on
    distinct nodes, SLURM_NTASKS_PER_NODE as before."""
    _to(engine, "0034")
    tables = MetaData()
    tables.reflect(engine)
    with engine.begin() as c:
        c.execute(insert(tables.tables["users"]).values(id=1, name="a", is_admin=False,
                                                        created_t_s=0.0))  # fmt: skip
        c.execute(insert(tables.tables["queues"]).values(
            name="q", nominal_gpus={}, borrowing_limit_gpus={}, lending_limit_gpus={},
            weight=1.0, created_t_s=0.0,
        ))  # fmt: skip
        jobs = tables.tables["jobs"]
        c.execute(
            insert(jobs).values(**{**JOB_AT_0001, "distinct_nodes": True, "gpus_per_worker": 4})
        )
        c.execute(insert(jobs).values(**{**JOB_AT_0001, "id": "2", "number": 2}))
    migrate(engine)
    with engine.connect() as c:
        rows = c.execute(text("SELECT id, gpus_per_node_asked, ntasks_alone FROM jobs "
                              "ORDER BY id")).all()  # fmt: skip
    assert [tuple(r) for r in rows] == [("1", "4", False), ("2", None, False)]
    _to(engine, "0034", down=True)
    assert "gpus_per_node_asked" not in {c["name"] for c in inspect(engine).get_columns("jobs")}
