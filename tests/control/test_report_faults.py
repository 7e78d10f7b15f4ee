"""A store error in any phase of a loop step loses no exit (issue 55 item 1).

The loop polls the executor first; an exit it polled is the executor's only word on that
attempt (the executor forgets it once reported). So the exits are carried from the moment
they are polled until a step that settles them commits: a locked store in the inventory's
sync, the sweep, or the plan's write fails that step, and the next one settles them. Real
processes (`LocalExecutor`), real stores (SQLite and PostgreSQL), the store's error injected
at the driver (`tests.control.faults`), a clock the test moves.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update
from tests.control.faults import Clock, FailingWrites, RefusingExecutor, failing_writes
from tests.control.loop_helpers import NODE, add_job, job, seed_cluster, states, step_until

from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import EventRow, NodeRow
from railyard.exec.local import LocalExecutor
from railyard.exec.protocol import ExitReport, JobHandle

SWEEP_INTERVAL_S = 5.0


class Counting:
    """The real executor, counting what its poll reported per job."""

    def __init__(self, inner: LocalExecutor) -> None:
        self.inner = inner
        self.reported: list[str] = []

    def poll(self) -> list[ExitReport]:
        reports = self.inner.poll()
        self.reported += [r.job_id for r in reports]
        return reports

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Site:
    """One 4-GPU node; the loop's refresh writes the node's row, as the Ray backend's sync of
    the machines it sees does each step (a store write between the poll and the plan)."""

    def __init__(self, store: Store, tmp_path: Path) -> None:
        seed_cluster(store, gpus=4)
        self.store, self.clock = store, Clock()
        self.executor = Counting(LocalExecutor(NODE, gpus=4, term_grace_s=2.0))
        config = LoopConfig(
            state_dir=tmp_path, cycle_interval_s=0.1, sweep_interval_s=SWEEP_INTERVAL_S
        )
        self.loop = Loop(store, self.executor, config, clock=self.clock, refresh=self._sync)

    def _sync(self) -> None:
        with self.store.session() as session:
            session.execute(
                update(NodeRow).where(NodeRow.name == NODE).values(updated_t_s=self.clock())
            )

    def ended_processes(self, *job_ids: str) -> None:
        """Wait until every rank of the jobs has exited (peeked at, never reaped: the
        executor's poll reaps it)."""
        for job_id in job_ids:
            raw = job(self.store, job_id).handle
            assert raw is not None
            for worker in JobHandle.from_dict(raw).workers:
                deadline = time.monotonic() + 60
                flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
                while os.waitid(os.P_PID, worker.pid, flags) is None:
                    assert time.monotonic() < deadline, f"job {job_id} did not exit"
                    time.sleep(0.02)

    def end_events(self, job_id: str) -> int:
        with self.store.session() as session:
            return int(
                session.scalar(
                    select(func.count())
                    .select_from(EventRow)
                    .where(EventRow.job_id == job_id, EventRow.kind == "completed")
                )
                or 0
            )


@pytest.fixture
def site(store: Store, tmp_path: Path) -> Iterator[Site]:
    made = Site(store, tmp_path)
    yield made
    for job_id in list(made.executor.running()):
        made.executor.cancel(job_id)


# phase -> the statement that fails there, as a busy store fails it (on both tries of a step)
PHASES = {
    "refresh": FailingWrites(times=2, text="UPDATE nodes"),
    "sweep": FailingWrites(times=2, text="ORDER BY jobs.updated_t_s, jobs.id", heads=("SELECT",)),
    "plan": FailingWrites(times=2, text="UPDATE jobs"),
    "events": FailingWrites(times=2, text="INSERT INTO events"),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_store_error_in_a_phase_loses_no_exit(site: Site, phase: str) -> None:
    ids = [add_job(site.store, [sys.executable, "-c", "pass"]) for _ in range(2)]
    site.loop.step()
    assert states(site.store) == dict.fromkeys(ids, "running")
    site.ended_processes(*ids)
    if phase == "sweep":
        site.clock.advance(SWEEP_INTERVAL_S + 1)  # this step sweeps
    faults = PHASES[phase]
    with failing_writes(
        site.store,
        FailingWrites(faults.nth, times=faults.times, text=faults.text, heads=faults.heads),
    ) as f:
        site.loop.step_or_report()
    assert f.failed >= 1, f"no {phase} statement ran"
    assert sorted(site.executor.reported) == sorted(ids)  # polled in the failing step
    step_until(site.loop, lambda: set(states(site.store).values()) == {"completed"}, timeout_s=15)
    assert sorted(site.executor.reported) == sorted(ids)  # each reported once
    assert [site.end_events(j) for j in ids] == [1, 1]  # and settled once


def test_refused_launches_are_forgotten_once_the_attempt_settles(
    store: Store, tmp_path: Path
) -> None:
    """The count of refused launches per attempt grew for the server's lifetime; it is
    kept only while the attempt may be tried again."""
    seed_cluster(store, gpus=4)
    executor = RefusingExecutor(LocalExecutor(NODE, gpus=4, term_grace_s=2.0), {})
    config = LoopConfig(state_dir=tmp_path, cycle_interval_s=0.1)
    loop = Loop(store, executor, config)  # type: ignore[arg-type]
    once, always = (add_job(store, [sys.executable, "-c", "pass"]) for _ in range(2))
    executor.refusals.update({once: 1, always: 3})
    step_until(loop, lambda: states(store) == {once: "completed", always: "failed"})
    assert executor.refused.count(once) == 1
    assert executor.refused.count(always) == 3
    assert loop.starter._tries == {}
