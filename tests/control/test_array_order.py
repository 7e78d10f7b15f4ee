"""Array tasks list and start in numeric index order: 4_2 before 4_10, like Slurm."""

from __future__ import annotations

import time
from pathlib import Path

from tests.control.loop_helpers import make_loop, seed_cluster, states, step_until

from railyard.control.store.database import Store
from railyard.control.store.tables import User
from railyard.control.submission import JobSubmit
from railyard.control.usecases import jobs


def _submit_array(store: Store, tmp_path: Path, array: str) -> list[str]:
    with store.session() as session:
        alice = session.get(User, 2)
        assert alice is not None
        spec = JobSubmit(command=["true"], gpus=1, queue="default", array=array)
        rows = jobs.submit(session, alice, spec, time.time(), spool_dir=tmp_path / "jobs")
        return [r.id for r in rows]


def test_array_tasks_list_in_numeric_order(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=1)
    ids = _submit_array(store, tmp_path, "2-11")
    with store.session() as session:
        admin = session.get(User, 1)
        assert admin is not None
        listed = [row.id for row, _ in jobs.list_jobs(session, admin)]
    assert listed == ids == [f"1_{i}" for i in range(2, 12)]


def test_array_tasks_start_in_numeric_order(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=1)
    _submit_array(store, tmp_path, "2-11")
    loop = make_loop(store, tmp_path, gpus=1)
    loop.step()
    started = [job_id for job_id, state in states(store).items() if state != "pending"]
    step_until(loop, lambda: "running" not in states(store).values())
    assert started == ["1_2"]
