"""The loop's read of the store is incremental: a step converts only the job rows that
changed since the last one, and never serves a row another writer changed.

The machines are the simulator's virtual executor (as in test_same_history.py), so the
counts below are the loop's own work; conversions are counted at `control.world`'s calls.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select, update
from tests.control.loop_helpers import Conversions, add_job

from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import Counter, JobRow, NodeRow, QueueRow, User
from railyard.sched import NodeState, SchedulerConfig
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.engine import Engine
from railyard.sim.executor import VirtualExecutor
from railyard.sim.workload import FinalState

FLAVOR = "H100"
PENDING = 40


def _world(store: Store, tmp_path: Path) -> tuple[Loop, Engine]:
    with store.session() as s:
        s.add(NodeRow(name="n0", flavor=FLAVOR, gpus=4, path=["su0", "lg0"], updated_t_s=0.0))
        s.add(User(id=1, name="admin", is_admin=True, created_t_s=0.0))
        s.add(User(id=2, name="alice", created_t_s=0.0))
        s.add(QueueRow(name="root", nominal_gpus={}, created_t_s=0.0))
        s.flush()
        s.add(QueueRow(name="default", parent="root", nominal_gpus={FLAVOR: 4}, created_t_s=0.0))
        s.add(Counter(name="job", value=0))
    engine = Engine()
    executor = VirtualExecutor(engine, CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0))
    for _ in range(PENDING):  # one GPU, an hour each: 4 run, the rest wait
        job_id = add_job(store, ["x"], flavor=FLAVOR, submit_t_s=0.0, updated_t_s=0.0)
        executor.register(job_id, 3600.0, 1, FinalState.COMPLETED)
    scheduler = SchedulerConfig(estimate_from_history=False)
    loop = Loop(store, executor, LoopConfig(state_dir=tmp_path, scheduler=scheduler),
                clock=lambda: engine.now_t_s)  # fmt: skip
    return loop, engine


def _step(loop: Loop, engine: Engine, t_s: float) -> None:
    engine.now_t_s = t_s
    loop.step()


def test_quiet_steps_convert_no_row_even_when_every_reason_turns(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop, engine = _world(store, tmp_path)
    counted = Conversions(monkeypatch)
    _step(loop, engine, 10.0)  # starts 4; the other 36 get their first reason
    _step(loop, engine, 20.0)  # the 4 started rows are read once more, as running
    before = _pending_reasons(store)
    counted.reset()
    with store.session() as s:  # an admin drains the node: every waiting job's reason turns
        s.execute(update(NodeRow).values(state=NodeState.DRAINING.value, updated_t_s=25.0))
    _step(loop, engine, 30.0)
    after = _pending_reasons(store)
    assert len(after) == PENDING - 4
    assert not set(before.items()) & set(after.items())
    _step(loop, engine, 40.0)
    assert (counted.jobs, counted.running) == (0, 0)


def _pending_reasons(store: Store) -> dict[str, str]:
    with store.session() as s:
        rows = s.execute(select(JobRow.id, JobRow.reason).where(JobRow.state == "pending"))
        return {job_id: reason for job_id, reason in rows}


def test_a_row_changed_by_another_writer_is_read_again(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop, engine = _world(store, tmp_path)
    _step(loop, engine, 10.0)
    _step(loop, engine, 20.0)
    with store.session() as s:  # the API holds job 40 and raises job 39 (their stamps move)
        s.execute(update(JobRow).where(JobRow.id == "40").values(hold="user", updated_t_s=25.0))
        s.execute(update(JobRow).where(JobRow.id == "39").values(priority=7, updated_t_s=25.0))
    counted = Conversions(monkeypatch)
    _step(loop, engine, 30.0)
    assert counted.jobs == 2
    assert loop.last_plan is not None
    assert loop.last_plan.reasons["40"].value == "JobHeldUser"
    with store.session() as s:
        row = s.get(JobRow, "39")
        assert row is not None
        assert row.priority == 7
