"""A task counts at least one CPU, as Slurm's (issue 52 item 7): 350 jobs that ask no cores
started at once on a 2-core node, each booked as 0 CPUs.

The loop over the simulator's virtual executor on a virtual clock (as test_array_backlog.py),
so a step is the loop's own work and nothing sleeps.
"""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import select

from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import Counter, JobRow, NodeRow, QueueMember, QueueRow, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases import jobs
from railyard.control.usecases.admission import admit_batch
from railyard.sched import SchedulerConfig
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.engine import Engine
from railyard.sim.executor import VirtualExecutor
from railyard.sim.workload import FinalState

CORES = 2
JOBS = 350
TICK_S = 10.0


def _seed(store: Store) -> None:
    """One 2-core CPU node, user alice (id 2) in queue default."""
    now = time.time()
    with store.session() as s:
        s.add(NodeRow(name="cpu0", flavor="cpu", gpus=0, cpu_cores=CORES, mem_gb=0.0,
                      path=["su0", "su0-lg0"], updated_t_s=now))  # fmt: skip
        s.add(User(id=1, name="admin", is_admin=True, unix_user="root", created_t_s=now))
        s.add(User(id=2, name="alice", is_admin=False, unix_user="root", created_t_s=now))
        s.add(QueueRow(name="default", nominal_gpus={}, created_t_s=now))
        s.flush()
        s.add(QueueMember(queue="default", user_id=2))
        s.add(Counter(name="job", value=0))


def test_350_cpu_jobs_without_cores_do_not_all_start_on_a_2_core_node(
    store: Store, tmp_path: Path
) -> None:
    _seed(store)
    engine = Engine()
    executor = VirtualExecutor(engine, CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0))
    config = LoopConfig(state_dir=tmp_path, scheduler=SchedulerConfig(estimate_from_history=False))
    loop = Loop(store, executor, config, clock=lambda: engine.now_t_s)
    with store.session() as session:
        alice = session.get(User, 2)
        assert alice is not None
        specs = [JobSubmit(command=["sleep", "100"])] * JOBS
        admitted = admit_batch(session, alice, specs, engine.now_t_s)
        stored = jobs.store_admitted(session, alice, admitted, engine.now_t_s, tmp_path / "jobs")
    for rows in stored:
        executor.register(rows[0].id, 3600.0, 0, FinalState.COMPLETED)
    for _ in range(3):
        engine.now_t_s += TICK_S
        loop.step()
    with store.session() as session:
        started = session.scalars(select(JobRow.id).where(JobRow.state != "pending")).all()
        booked = session.scalars(select(JobRow.cpus_per_worker)).all()
    assert len(started) == CORES
    assert set(booked) == {1}  # a task without --cpus-per-task counts one CPU
