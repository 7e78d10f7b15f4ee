"""The loop with real processes: it wakes when a job exits (not only on its interval), and a
held job does not start until released."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import update
from tests.control.loop_helpers import add_job, job, make_loop, seed_cluster, states, step_until

from railyard.control.loop.apply import write_plan
from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.loop.world import Seen
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow
from railyard.exec.exitwatch import SUPPORTED
from railyard.exec.local import LocalExecutor
from railyard.sched import Usage
from railyard.sched.decisions import CycleResult
from railyard.sched.lifecycle import StepPlan

PY = sys.executable


@pytest.mark.skipif(not SUPPORTED, reason="no pidfds here: the loop falls back to its interval")
def test_a_job_exit_wakes_the_loop(store: Store, tmp_path: Path) -> None:
    """With a 10-minute idle interval the loop only steps on events; the second whole-node job
    can only start because the first one's exit woke it. The 60 s bound is liveness, not speed.
    """
    seed_cluster(store, gpus=4)
    config = LoopConfig(state_dir=tmp_path, cycle_interval_s=600.0, event_coalesce_s=0.0)
    loop = Loop(store, LocalExecutor("node0", gpus=4, term_grace_s=2.0), config)
    first = add_job(store, [PY, "-c", "import time; time.sleep(0.5)"], gpus_per_worker=4)
    second = add_job(store, ["true"], gpus_per_worker=4)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()  # runs one step at once: the first job starts, the second waits for GPUs
    try:
        deadline = time.monotonic() + 60
        while states(store)[second] != "completed":
            assert time.monotonic() < deadline, states(store)
            time.sleep(0.05)
        assert states(store)[first] == "completed"
        assert job(store, second).start_t_s >= job(store, first).end_t_s  # type: ignore[operator]
    finally:
        stop.set()
        loop.wake()
        thread.join(10)


def test_held_job_waits_with_a_reason_until_released(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=4)
    service = make_loop(store, tmp_path)
    held = add_job(store, ["true"], hold="user", reason="JobHeldUser")
    admin_held = add_job(store, ["true"], hold="admin", reason="JobHeldAdmin")
    free = add_job(store, ["true"])
    step_until(service, lambda: states(store)[free] == "completed")
    service.step()
    assert states(store)[held] == states(store)[admin_held] == "pending"
    assert (job(store, held).reason, job(store, admin_held).reason) == (
        "JobHeldUser",
        "JobHeldAdmin",
    )
    with store.session() as s:
        s.execute(update(JobRow).where(JobRow.id == held).values(hold=None, reason=""))
    step_until(service, lambda: states(store)[held] == "completed")
    assert states(store)[admin_held] == "pending"


def test_a_met_dependency_is_cleared_and_the_job_waits_from_then(
    store: Store, tmp_path: Path
) -> None:
    """Submitted 8 days ago behind `afterok`, a job has waited for GPUs only since its
    dependency was met: the loop clears the dependency and sets its begin time then (Slurm's
    EligibleTime), so it is not taken for starving."""
    seed_cluster(store, gpus=4)
    service = make_loop(store, tmp_path)
    first = add_job(store, ["true"])
    then = add_job(
        store, ["true"], dependency=f"afterok:{first}", submit_t_s=time.time() - 8 * 86_400
    )
    step_until(service, lambda: states(store)[then] == "completed")
    row, before = job(store, then), job(store, first)
    assert row.dependency is None
    assert before.end_t_s is not None
    assert row.begin_t_s is not None
    assert before.end_t_s <= row.begin_t_s <= row.start_t_s  # type: ignore[operator]


def test_a_dependency_changed_since_the_read_is_not_cleared(store: Store, tmp_path: Path) -> None:
    """The step found `afterok:1` met; `railyard update --dependency afterok:2` landed
    before the plan was written. The write compares-and-sets on the dependency it read, so
    the user's new one stands (and the begin time does not move); the one read is cleared."""
    seed_cluster(store, gpus=4)
    changed = add_job(store, ["true"], dependency="afterok:2")
    unchanged = add_job(store, ["true"], dependency="afterok:1")
    read = {changed: "afterok:1", unchanged: "afterok:1"}
    plan = StepPlan((), (), (), CycleResult(), {}, (), Usage(), satisfied=(changed, unchanged))
    now = time.time()
    with store.session() as s:
        write_plan(s, plan, Seen(dependencies=read), now)
    kept, cleared = job(store, changed), job(store, unchanged)
    assert (kept.dependency, kept.begin_t_s) == ("afterok:2", None)
    assert (cleared.dependency, cleared.begin_t_s) == (None, now)
