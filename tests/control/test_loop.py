"""The service loop with real processes: decisions are written before they are acted on."""

from __future__ import annotations

import sys
from pathlib import Path

from sqlalchemy import func, select
from tests.control.loop_helpers import (
    add_job,
    job,
    make_loop,
    seed_cluster,
    states,
    step_until,
)

from railyard.control.store.database import Store
from railyard.control.store.tables import EventRow

PY = sys.executable


def test_submit_run_finish(store: Store, tmp_path: Path) -> None:
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    job_id = add_job(
        store, [PY, "-c", "print('hello from rank', __import__('os').environ['RANK'])"]
    )
    step_until(service, lambda: states(store)[job_id] == "completed")
    row = job(store, job_id)
    assert (row.exit_code, row.outcome, row.reason) == (0, "completed", "Completed")
    assert row.placement == {"node0": [0]}
    log = (tmp_path / "jobs" / job_id / "logs" / "rank-0.log").read_text()
    assert "hello from rank 0" in log


def test_gang_waits_for_room_with_a_reason(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=4)
    service = make_loop(store, tmp_path)
    big = add_job(store, [PY, "-c", "import time; time.sleep(1.5)"], workers=3)
    second = add_job(store, [PY, "-c", "pass"], workers=2)
    service.step()
    assert states(store) == {big: "running", second: "pending"}
    assert job(store, second).reason == "Resources"
    step_until(service, lambda: states(store)[second] == "completed")
    assert states(store)[big] == "completed"


def test_failed_job_is_failed_not_requeued(store: Store, tmp_path: Path) -> None:
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    job_id = add_job(store, [PY, "-c", "raise SystemExit(3)"])
    step_until(service, lambda: states(store)[job_id] == "failed")
    assert job(store, job_id).exit_code == 3
    assert job(store, job_id).restart_count == 0


def test_cancel_running_job(store: Store, tmp_path: Path) -> None:
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    job_id = add_job(store, [PY, "-c", "import time; time.sleep(60)"])
    step_until(service, lambda: states(store)[job_id] == "running")
    with store.session() as s:  # what the API's cancel writes
        row = s.get(type(job(store, job_id)), job_id)
        assert row is not None
        row.state = "cancelling"
    step_until(service, lambda: states(store)[job_id] == "cancelled")


def test_time_limit(store: Store, tmp_path: Path) -> None:
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    job_id = add_job(store, [PY, "-c", "import time; time.sleep(60)"], walltime_s=0.5)
    step_until(service, lambda: states(store)[job_id] == "timeout")  # Slurm's TIMEOUT
    assert job(store, job_id).reason == "TimeLimit"


def test_array_throttle(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=4)
    service = make_loop(store, tmp_path)
    ids = [
        add_job(
            store,
            [PY, "-c", "import time; time.sleep(1)"],
            array_parent="9",
            array_index=i,
            array_max_running=2,
        )
        for i in range(4)
    ]
    service.step()
    running = [i for i in ids if states(store)[i] == "running"]
    assert len(running) == 2
    waiting = [i for i in ids if states(store)[i] == "pending"]
    assert {job(store, i).reason for i in waiting} == {"JobArrayTaskLimit"}
    step_until(service, lambda: all(states(store)[i] == "completed" for i in ids))


def test_array_tasks_see_slurm_variables(store: Store, tmp_path: Path) -> None:
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    script = "import os; print(os.environ['SLURM_ARRAY_TASK_ID'], os.environ['SLURM_JOB_ID'])"
    job_id = add_job(store, [PY, "-c", script], array_parent="7", array_index=3)
    step_until(service, lambda: states(store)[job_id] == "completed")
    log = (tmp_path / "jobs" / job_id / "logs" / "rank-0.log").read_text()
    assert f"3 {job_id}" in log


def test_decision_is_written_before_the_start(store: Store, tmp_path: Path) -> None:
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    job_id = add_job(store, [PY, "-c", "pass"])
    step_until(service, lambda: states(store)[job_id] == "completed")
    with store.session() as s:
        kinds = [
            e.kind
            for e in s.scalars(
                select(EventRow).where(EventRow.job_id == job_id).order_by(EventRow.id)
            )
        ]
        finished = s.scalar(
            select(func.count())
            .select_from(EventRow)
            .where(EventRow.job_id == job_id, EventRow.kind == "completed")
        )
    assert kinds[0] == "start"
    assert finished == 1
