"""The Alembic revisions and ``tables.py`` describe the same schema, and an upgrade keeps the
rows written before it (on SQLite and PostgreSQL)."""

from __future__ import annotations

import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, select, text
from tests.control.conftest import fresh_pg_database

from railyard.control.server import adopt_bootstrap_admin
from railyard.control.store.database import Store, _alembic_config, make_engine, sqlite_url
from railyard.control.store.tables import Base, User

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier


def test_revisions_match_the_tables(store: Store) -> None:
    with store.engine.connect() as connection:
        diffs = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diffs == []


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        engine = make_engine(sqlite_url(tmp_path / "old.db"))
        yield engine
        engine.dispose()
        return
    with fresh_pg_database() as url:
        engine = make_engine(url)
        yield engine
        engine.dispose()


def upgrade(engine: Engine, revision: str) -> None:
    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def test_upgrade_keeps_users_and_jobs(empty_engine: Engine) -> None:
    """Users written before Unix accounts existed run as the account of their own name; old
    jobs keep their number as their task number."""
    upgrade(empty_engine, "0001")
    with empty_engine.begin() as c:
        c.execute(text("INSERT INTO users (name, is_admin, created_t_s) VALUES ('ann', true, 0)"))
        c.execute(text(
            "INSERT INTO queues (name, nominal_gpus, borrowing_limit_gpus, lending_limit_gpus, "
            "weight, created_t_s) VALUES ('q', '{}', '{}', '{}', 1, 0)"
        ))  # fmt: skip
        c.execute(text(
            "INSERT INTO jobs (id, number, user_id, queue, name, state, reason, command, "
            "workdir, env, flavor, workers, gpus_per_worker, priority, preemptible, "
            "min_runtime_s, checkpoint_grace_s, preempt_signal, requeue_on_failure, "
            "max_restarts, restart_count, submit_t_s, updated_t_s) VALUES ('5', 5, 1, 'q', '', "
            "'pending', '', '[\"true\"]', '', '{}', 'v', 1, 1, 0, false, 0, 30, 'SIGUSR1', "
            "false, 3, 0, 0, 0)"
        ))  # fmt: skip
    upgrade(empty_engine, "head")
    with empty_engine.connect() as c:
        assert c.execute(text("SELECT unix_user FROM users")).scalar_one() == "ann"
        job = c.execute(
            text("SELECT task_number, unix_user, export, distinct_nodes, requeue FROM jobs")
        ).one()
    assert tuple(job) == (5, "ann", "ALL", False, False)
    with empty_engine.connect() as connection:
        diffs = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diffs == []


def test_an_upgraded_admin_runs_as_the_account_that_starts_the_server(store: Store) -> None:
    """After the upgrade the bootstrap admin maps to a Unix account "admin"; where there is
    none, `railyard up` gives it its own account (and leaves other users alone)."""
    with store.session() as session:
        session.add(User(name="admin", is_admin=True, created_t_s=0.0))
        session.add(User(name="bob", created_t_s=0.0))
    with store.session() as session:
        adopt_bootstrap_admin(session, "svc")
    with store.session() as session:
        mapped = {u.name: u.unix_user for u in session.scalars(select(User))}
    expected_admin = "admin" if _account_exists("admin") else "svc"
    assert mapped == {"admin": expected_admin, "bob": "bob"}


def _account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
