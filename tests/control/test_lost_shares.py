"""Shares lost with their node agent survive a control-plane restart (issue 55, item 4).

A Ray node agent can die while the ranks it started live on: the attempt is a node failure,
and only an agent on that node can end the old ranks, so the executor keeps the node out of
use until one has (`RayExecutor.probe`). That memory was the executor's alone: a control
plane restarted meanwhile placed the next attempt beside the old ranks on the same GPUs. Here
the loop writes each lost share to the store before it settles the attempt, gives the shares
back to a restarted control plane's executor, and deletes each once the executor ended it.

Real stores (SQLite and PostgreSQL) and the real loop; the executor is a stand-in with the
Ray executor's contract for lost shares (`KeepsLostShares`): a real Ray cluster's agent that
dies while its ranks live on is tested in ``tests/multinode/test_ray_executor.py`` (slow).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from sqlalchemy import select
from tests.control.faults import Clock, FailingWrites, failing_writes
from tests.control.loop_helpers import NODE, add_job, job, seed_cluster

from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import JobState, LostShareRow
from railyard.exec.exits import NODE_FAIL_SIGNAL
from railyard.exec.protocol import (
    ExitReport,
    JobHandle,
    KeepsLostShares,
    LaunchSpec,
    Outcome,
    SharesChanged,
    WorkerHandle,
)


class AgentsThatDie:
    """Attempts that run until told; :meth:`agent_dies` loses one's share as the Ray executor
    does (a node failure reported, the share remembered until :meth:`end_lost` ends it)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.handles: dict[str, JobHandle] = {}
        self.reports: list[ExitReport] = []
        self.remembered: list[JobHandle] = []  # lost and not ended: the node stays out of use
        self._changed: tuple[list[JobHandle], list[JobHandle]] = ([], [])

    def start(self, spec: LaunchSpec) -> JobHandle:
        worker = WorkerHandle(job_id=spec.job_id, rank=0, node=NODE, pid=4242, pgid=4242,
                              start_time_ticks=7, log_path=self.tmp_path / "log",
                              exit_path=self.tmp_path / "exit")  # fmt: skip
        handle = JobHandle(job_id=spec.job_id, restart_count=spec.restart_count,
                           workers=(worker,), master_port=29500)  # fmt: skip
        self.handles[spec.job_id] = handle
        return handle

    def agent_dies(self, job_id: str) -> JobHandle:
        handle = self.handles.pop(job_id)
        self.reports.append(ExitReport(job_id=job_id, exit_code=None, signal=NODE_FAIL_SIGNAL,
                                       outcome=Outcome.FAILED,
                                       restart_count=handle.restart_count))  # fmt: skip
        self.remembered.append(handle)
        self._changed[0].append(handle)
        return handle

    def end_lost(self) -> None:
        """The node answered a probe: its agent ended the old ranks."""
        self._changed[1].extend(self.remembered)
        self.remembered = []

    def lost_shares(self) -> SharesChanged:
        lost, ended = self._changed
        self._changed = ([], [])
        return SharesChanged(tuple(lost), tuple(ended))

    def remember_lost(self, shares: Sequence[JobHandle]) -> None:
        self.remembered.extend(shares)

    def poll(self) -> list[ExitReport]:
        reports, self.reports = self.reports, []
        return reports

    def adopt(self, handles: Sequence[JobHandle]) -> list[ExitReport]:
        self.handles.update((h.job_id, h) for h in handles)
        return []

    def cancel(self, job_id: str) -> None:
        handle = self.handles.pop(job_id, None)
        if handle is not None:
            self.reports.append(ExitReport(job_id=job_id, exit_code=None, signal="SIGTERM",
                                           outcome=Outcome.KILLED,
                                           restart_count=handle.restart_count))  # fmt: skip

    def request_checkpoint_stop(self, job_id: str, grace_s: float) -> None:
        self.cancel(job_id)

    def signal(self, job_id: str, signal_name: str | None = None) -> None:
        pass

    def running(self) -> set[str]:
        return set(self.handles)


def control_plane(store: Store, tmp_path: Path, clock: Clock) -> tuple[Loop, AgentsThatDie]:
    executor = AgentsThatDie(tmp_path)
    assert isinstance(executor, KeepsLostShares)
    config = LoopConfig(state_dir=tmp_path, cycle_interval_s=0.1)
    return Loop(store, executor, config, clock=clock), executor


def lost_rows(store: Store) -> list[tuple[str, int, str]]:
    with store.session() as session:
        rows = session.scalars(select(LostShareRow)).all()
        return sorted((r.job_id, r.restart_count, r.node) for r in rows)


def first_attempt_runs(store: Store, job_id: str) -> bool:
    row = job(store, job_id)
    return row.state == JobState.RUNNING.value and row.restart_count == 0


def test_a_lost_share_is_given_back_after_a_restart_until_it_is_ended(
    store: Store, tmp_path: Path
) -> None:
    seed_cluster(store, gpus=4)
    clock = Clock()
    loop, first = control_plane(store, tmp_path, clock)
    job_id = add_job(store, ["true"])
    loop.step()
    assert job(store, job_id).state == JobState.RUNNING.value
    lost = first.agent_dies(job_id)
    loop.step()
    assert not first_attempt_runs(store, job_id)  # settled: a node failure (requeued)
    assert lost_rows(store) == [(job_id, 0, NODE)]
    # the control plane restarts: a new executor, which knew nothing of the lost share
    loop, second = control_plane(store, tmp_path, clock)
    loop.reconcile()
    assert second.remembered == [lost]  # its node takes no job until the share is ended
    loop.step()
    assert lost_rows(store) == [(job_id, 0, NODE)]  # not ended yet: kept
    second.end_lost()
    loop.step()
    assert lost_rows(store) == []
    loop, third = control_plane(store, tmp_path, clock)
    loop.reconcile()
    assert third.remembered == []


def test_a_lost_share_is_written_before_its_attempt_is_settled(
    store: Store, tmp_path: Path
) -> None:
    """The share's row fails to be written (a locked store): the step fails before it
    settles the node failure, so a control plane that died then would adopt the attempt
    again rather than forget its share; the next step writes both."""
    seed_cluster(store, gpus=4)
    clock = Clock()
    loop, executor = control_plane(store, tmp_path, clock)
    job_id = add_job(store, ["true"])
    loop.step()
    executor.agent_dies(job_id)
    faults = FailingWrites(times=2, text="lost_shares")
    with failing_writes(store, faults):
        assert loop.step_or_report() is None  # the step failed (and its one retry)
    assert faults.failed == 2
    assert first_attempt_runs(store, job_id)
    assert lost_rows(store) == []
    loop.step()
    assert lost_rows(store) == [(job_id, 0, NODE)]
    assert not first_attempt_runs(store, job_id)


def test_a_share_lost_twice_is_one_row(store: Store, tmp_path: Path) -> None:
    """A control plane that died after writing the share but before settling the attempt
    adopts it again and may lose the same share again: one row, and no failed step."""
    seed_cluster(store, gpus=4)
    clock = Clock()
    loop, executor = control_plane(store, tmp_path, clock)
    job_id = add_job(store, ["true"])
    loop.step()
    lost = executor.agent_dies(job_id)
    executor._changed[0].append(replace(lost))  # reported lost once more
    loop.step()
    assert lost_rows(store) == [(job_id, 0, NODE)]
