"""A big array lands: the loop converts its new rows a bounded number per step
(``LoopConfig.convert_max_rows``) and makes no plan until it has seen every pending job.

What must hold meanwhile and after: a throttled array's tasks start in index order and never
more than ``%N`` at once; a job submitted after the array with a higher priority is not passed
over by the tasks seen first; a hold or a cancel of one task placed while the rows are being
read wins; every pending task then carries a reason, as ``railyard queue`` shows it.

The machines are the simulator's virtual executor on a virtual clock (as in
test_world_cache.py), so a step is the loop's own work and nothing sleeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from tests.control.loop_helpers import seed_cluster

import railyard.control.loop.world as world
from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases import jobs
from railyard.sched import SchedulerConfig
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.engine import Engine
from railyard.sim.executor import VirtualExecutor
from railyard.sim.workload import FinalState

TASKS = 300
PER_STEP = 50  # convert_max_rows: the array is read in TASKS / PER_STEP steps
TICK_S = 10.0


class Virtual:
    """A 4-GPU node, alice, and the loop over the virtual executor, stepped TICK_S apart."""

    def __init__(self, store: Store, tmp_path: Path, steps_max: int = 8) -> None:
        seed_cluster(store, gpus=4)
        self.store, self.tmp = store, tmp_path
        self.engine = Engine()
        self.executor = VirtualExecutor(
            self.engine, CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0)
        )
        config = LoopConfig(
            state_dir=tmp_path,
            scheduler=SchedulerConfig(estimate_from_history=False),
            convert_max_rows=PER_STEP,
            converting_steps_max=steps_max,
        )
        self.loop = Loop(store, self.executor, config, clock=lambda: self.engine.now_t_s)
        self.backlog = 0  # the last step's

    def submit(self, run_s: float, **fields: Any) -> list[str]:
        with self.store.session() as session:
            alice = session.get(User, 2)
            assert alice is not None
            spec = JobSubmit(command=["true"], gpus=1, queue="default", **fields)
            rows = jobs.submit(session, alice, spec, self.engine.now_t_s,
                               spool_dir=self.tmp / "jobs")  # fmt: skip
        ids = [r.id for r in rows]
        for job_id in ids:
            self.executor.register(job_id, run_s, 1, FinalState.COMPLETED)
        return ids

    def step(self) -> list[str]:
        """Advance the clock one tick (jobs end), step once; the jobs it started."""
        until = self.engine.now_t_s + TICK_S
        self.engine.run(lambda _t, ev: self.executor.on_event(ev), until_t_s=until)
        self.engine.now_t_s = until
        report = self.loop.step()
        self.backlog = report.backlog
        return report.started

    def rows(self) -> dict[str, tuple[str, str]]:
        """Every job's (state, reason), as `railyard queue` reads them."""
        with self.store.session() as s:
            return {i: (st, r) for i, st, r in s.execute(select(JobRow.id, JobRow.state,
                                                                JobRow.reason))}  # fmt: skip

    def as_user(self, act: Any, job_id: str) -> None:
        with self.store.session() as session:
            alice = session.get(User, 2)
            assert alice is not None
            act(session, alice, job_id, self.engine.now_t_s)


@pytest.fixture
def cluster(store: Store, tmp_path: Path) -> Virtual:
    return Virtual(store, tmp_path)


def test_a_step_converts_at_most_convert_max_rows_and_plans_once_all_are_seen(
    cluster: Virtual, monkeypatch: pytest.MonkeyPatch
) -> None:
    converted: list[int] = [0]
    original = world.job_of_columns

    def counted(*a: Any) -> Any:
        converted[0] += 1
        return original(*a)

    monkeypatch.setattr(world, "job_of_columns", counted)
    cluster.submit(3600.0, array=f"0-{TASKS - 1}%2")
    per_step, started, left = [], [], []
    for _ in range(TASKS // PER_STEP):
        converted[0] = 0
        started.append(cluster.step())
        per_step.append(converted[0])
        left.append(cluster.backlog)
    assert per_step == [PER_STEP] * (TASKS // PER_STEP)
    assert left == [TASKS - PER_STEP * (i + 1) for i in range(TASKS // PER_STEP)]
    assert started[:-1] == [[]] * (TASKS // PER_STEP - 1)  # no plan while rows are unseen
    assert started[-1] == ["1_0", "1_1"]
    assert cluster.backlog == 0


def test_throttled_array_starts_in_index_order_never_more_than_n(cluster: Virtual) -> None:
    ids = cluster.submit(15.0, array=f"0-{TASKS - 1}%2")  # each task ends in its second tick
    order: list[str] = []
    for _ in range(TASKS // PER_STEP + 30):
        order += cluster.step()
        live = [i for i, (state, _) in cluster.rows().items() if state not in
                ("pending", "completed")]  # fmt: skip
        assert len(live) <= 2
    assert len(order) > 20
    assert order == ids[: len(order)]  # 1_0, 1_1, 1_2, ... as Slurm starts them


def test_every_pending_task_gets_a_reason_once_all_are_seen(cluster: Virtual) -> None:
    cluster.submit(3600.0, array=f"0-{TASKS - 1}%2")
    for _ in range(TASKS // PER_STEP):
        cluster.step()
    rows = cluster.rows()
    waiting = {r for state, r in rows.values() if state == "pending"}
    assert waiting == {"JobArrayTaskLimit"}
    assert sum(state == "pending" for state, _ in rows.values()) == TASKS - 2


def test_a_later_job_of_higher_priority_is_not_passed_over(cluster: Virtual) -> None:
    # No throttle: four tasks would fill the node. The later job is of the default class.
    cluster.submit(3600.0, array=f"0-{TASKS - 1}", priority="low")
    cluster.engine.now_t_s += 1.0
    [urgent] = cluster.submit(3600.0)  # converted last: it is the newest row
    started: list[str] = []
    while not started:
        started = cluster.step()
    assert urgent in started
    assert started == [urgent, "1_0", "1_1", "1_2"]


def test_hold_and_cancel_of_one_task_while_the_array_is_read(cluster: Virtual) -> None:
    cluster.submit(3600.0, array=f"0-{TASKS - 1}")
    cluster.step()  # tasks 0..49 converted, nothing planned
    cluster.as_user(jobs.hold_job, "1_1")  # converted already: its stamp moves
    cluster.as_user(jobs.cancel_job, "1_2")
    cluster.as_user(jobs.hold_job, "1_250")  # not read yet
    started: list[str] = []
    while not started:
        started = cluster.step()
    assert started == ["1_0", "1_3", "1_4", "1_5"]
    rows = cluster.rows()
    assert rows["1_1"] == ("pending", "JobHeldUser")
    assert rows["1_250"] == ("pending", "JobHeldUser")
    assert rows["1_2"][0] == "cancelled"


def test_after_converting_steps_max_steps_one_step_reads_all_and_plans(
    store: Store, tmp_path: Path
) -> None:
    """Rows arriving faster than the steps read them never stop the loop deciding."""
    cluster = Virtual(store, tmp_path, steps_max=2)
    cluster.submit(3600.0, array=f"0-{TASKS - 1}%2")
    started = [cluster.step() for _ in range(3)]
    assert started == [[], [], ["1_0", "1_1"]]
    assert cluster.backlog == 0
    second = cluster.submit(3600.0, array=f"0-{TASKS - 1}%2")  # the count starts again
    assert [cluster.step() for _ in range(3)] == [[], [], second[:2]]


def test_on_postgresql_reasons_are_planned_for_their_ids_and_stay_heap_only(
    cluster: Virtual,
) -> None:
    """A generic plan for ``id = ANY(:ids)`` probed the index once per id (35 -> 480 ms a
    chunk of 5,000 once psycopg had prepared it); each step that writes reasons plans them for
    their ids, and the jobs table leaves room on its pages for heap-only updates."""
    from sqlalchemy import event, text

    sent: list[str] = []
    event.listen(cluster.store.engine, "before_cursor_execute",
                 lambda *a: sent.append(a[2].strip()))  # fmt: skip
    cluster.submit(3600.0, array=f"0-{TASKS - 1}%2")
    for _ in range(TASKS // PER_STEP + 1):
        cluster.step()
    reason_updates = [i for i, sql in enumerate(sent)
                      if sql.startswith("UPDATE jobs SET reason")]  # fmt: skip
    assert reason_updates, sent[-20:]
    forced = [i for i, sql in enumerate(sent) if "plan_cache_mode" in sql]
    if cluster.store.engine.dialect.name == "postgresql":
        assert forced
        assert forced[0] < reason_updates[0]
        with cluster.store.engine.connect() as conn:
            options = conn.execute(text("SELECT reloptions FROM pg_class WHERE relname = 'jobs'"))
            assert options.scalar_one() == ["fillfactor=70"]
    else:
        assert forced == []
