"""``scontrol update JobId=12 ArrayTaskThrottle=N`` through the update use case: the array's
tasks not yet ended take the new limit, the loop starts what it now allows, and the spec they
show says so (the loop's store is SQLite here; test_job_update runs the update on
PostgreSQL too)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from tests.control.loop_helpers import Cluster, states, step_until, stop_all

from railyard.control.errors import Invalid
from railyard.control.schemas import JobUpdate
from railyard.control.store.tables import JobRow, User
from railyard.control.usecases.jobupdate import update_job

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


def _throttle(cluster: Cluster, job_id: str, limit: int) -> list[str]:
    """The update as alice; the one task it answers with, then every task as stored."""
    with cluster.store.session() as session:
        alice = session.get(User, 2)
        assert alice is not None
        [(shown, _)] = update_job(session, alice, job_id, JobUpdate(array_throttle=limit),
                                  time.time())  # fmt: skip
        assert (shown.id, shown.array_spec) == (f"{job_id}_0", f"0-2%{limit}" if limit else "0-2")
    with cluster.store.session() as session:
        rows = session.scalars(select(JobRow).where(JobRow.array_parent == job_id))
        return sorted(f"{row.id} {row.array_spec}" for row in rows)


def test_raising_an_array_s_throttle_starts_more_of_its_tasks(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    [first, second, third] = cluster.submit(command=SLEEP, array="0-2%1")
    parent = first.split("_")[0]

    def running() -> list[str]:
        return sorted(j for j, s in states(cluster.store).items() if s == "running")

    step_until(cluster.loop, lambda: running() == [first])
    for _ in range(5):  # the limit holds the others back
        cluster.loop.step()
    assert running() == [first]
    assert _throttle(cluster, parent, 2) == [f"{t} 0-2%2" for t in (first, second, third)]
    step_until(cluster.loop, lambda: running() == [first, second])
    assert _throttle(cluster, parent, 0) == [f"{t} 0-2" for t in (first, second, third)]
    step_until(cluster.loop, lambda: running() == [first, second, third])
    with cluster.store.session() as session:
        row = session.get(JobRow, third)
        assert row is not None
        assert row.array_max_running is None
    stop_all(cluster.loop)


def test_a_throttle_names_an_array_and_goes_alone(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    [single] = cluster.submit(command=["true"])
    with cluster.store.session() as session:
        alice = session.get(User, 2)
        assert alice is not None
        alone = "an array's throttle is updated alone"
        cases = ((JobUpdate(array_throttle=2), f"job {single} is no array"),
                 (JobUpdate(array_throttle=2, time="10"), alone))  # fmt: skip
        for change, said in cases:
            with pytest.raises(Invalid, match=said):
                update_job(session, alice, single, change, time.time())
