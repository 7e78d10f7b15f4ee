"""A running job's time limit changed under the loop (``scontrol update TimeLimit=``): a
user's shorter limit stops it as a time limit does, an admin's longer one moves the end the
loop plans with; on SQLite and PostgreSQL."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from tests.control.loop_helpers import (
    add_job,
    job,
    make_loop,
    seed_cluster,
    states,
    step_until,
    stop_all,
)

from railyard.control.schemas import JobUpdate
from railyard.control.store.database import Store
from railyard.control.store.tables import User
from railyard.control.usecases.jobupdate import update_job
from railyard.sched import StopCause

pytestmark = pytest.mark.stores

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


def _update(store: Store, user_id: int, job_id: str, limit: str) -> float | None:
    """The job's limit after ``limit`` is applied as that user."""
    with store.session() as session:
        actor = session.get(User, user_id)
        assert actor is not None
        [(row, _)] = update_job(session, actor, job_id, JobUpdate(time=limit), time.time())
        return row.walltime_s


def test_a_shorter_limit_stops_a_running_job_and_a_longer_one_moves_its_end(
    store: Store, tmp_path: Path
) -> None:
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    short, extended = (add_job(store, SLEEP, walltime_s=3600.0) for _ in range(2))
    step_until(service, lambda: states(store)[short] == states(store)[extended] == "running")
    assert _update(store, 2, short, "0:01") == 1.0  # alice (1 s: the API takes seconds)
    assert _update(store, 1, extended, "+1:00:00") == 7200.0  # an admin
    step_until(service, lambda: states(store)[short] == "timeout")
    assert job(store, short).stop_cause == StopCause.TIME_LIMIT.value
    assert (states(store)[extended], job(store, extended).walltime_s) == ("running", 7200.0)
    stop_all(service)
