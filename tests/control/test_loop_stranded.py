"""Nothing is stranded, and /healthz tells the truth (issue 21): a failed start or a failed
write of one job is that job's alone; rows left in STARTING, CANCELLING or PREEMPTING past
their deadline are started again or settled while the server runs; /healthz answers 503 with
the reason while a failure is recent, the loop is behind or rows are stuck, and /metrics
carries the same facts. Real processes (LocalExecutor), real stores (SQLite and PostgreSQL),
a clock the test moves."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from tests.control.faults import Clock, FailingWrites, RefusingExecutor, failing_writes
from tests.control.loop_helpers import NODE, add_job, job, seed_cluster, states, step_until
from tests.control.metrics_helpers import samples, value

from railyard.control.api.app import create_app
from railyard.control.loop.service import Loop, LoopConfig, StepReport
from railyard.control.metrics.prometheus import MetricsConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow
from railyard.exec.local import LocalExecutor

# Append "<job> <attempt>" to argv[1], then run until argv[2] exists (at most a minute).
RUN = """
import os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(f"{os.environ['RAILYARD_JOB_ID']} {os.environ['RAILYARD_RESTART_COUNT']}\\n")
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.05)
"""


class Site:
    """One 4-GPU node, a loop on a test clock, and /healthz and /metrics over HTTP."""

    def __init__(self, store: Store, tmp_path: Path, refusals: dict[str, int] | None = None):
        seed_cluster(store, gpus=4)
        self.store, self.clock = store, Clock()
        local = LocalExecutor(NODE, gpus=4, term_grace_s=2.0)
        self.executor = RefusingExecutor(local, refusals if refusals is not None else {})
        # one step launches every job it starts, however loaded the machine: these tests are
        # about a failure's reach, not the launch budget (a loaded main tier launched only the
        # first in its budget, and the second and third were left for the next step)
        config = LoopConfig(state_dir=tmp_path, cycle_interval_s=0.1, launch_budget_s=60.0)
        self.loop = Loop(store, self.executor, config, clock=self.clock)  # type: ignore[arg-type]
        self.out, self.release = tmp_path / "out.txt", tmp_path / "release"
        app = create_app(
            store,
            wake=self.loop.wake,
            state_dir=tmp_path,
            clock=self.clock,
            loop_health=self.loop.health,
            metrics=MetricsConfig(open_access=True, loop_health=self.loop.health),
        )
        self.http = TestClient(app)

    def add(self) -> str:
        return add_job(self.store, [sys.executable, "-c", RUN, str(self.out), str(self.release)])

    def healthz(self) -> tuple[int, dict[str, object]]:
        response = self.http.get("/healthz")
        return response.status_code, response.json()

    def metric(self, name: str, **labels: str) -> float:
        return value(samples(self.http.get("/metrics").text), name, **labels)

    def finish(self, *job_ids: str) -> None:
        self.release.touch()
        step_until(self.loop, lambda: all(states(self.store)[j] == "completed" for j in job_ids))

    def launches(self) -> list[str]:
        return sorted(self.out.read_text().splitlines())


@pytest.fixture
def site(store: Store, tmp_path: Path) -> Iterator[Site]:
    made = Site(store, tmp_path)
    yield made
    made.release.touch()
    for job_id in list(made.executor.running()):
        made.executor.cancel(job_id)


def test_a_failed_record_strands_no_other_job(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    first, second, third = site.add(), site.add(), site.add()
    # the store refuses to record the first job's launch: in the step's one transaction,
    # then in its own
    faults = FailingWrites(text="handle", job_id=first, times=2)
    with failing_writes(site.store, faults), caplog.at_level(logging.WARNING):
        report = site.loop.step()  # the step goes on
    assert faults.failed == 2
    assert sorted(report.started) == [second, third]
    # the store refusing (an OperationalError) is one line in the log, not a traceback
    [line] = [r for r in caplog.records if r.getMessage().startswith("recording the start")]
    assert (line.levelno, line.exc_info) == (logging.WARNING, None), line.getMessage()
    assert "database is locked" in line.getMessage()
    assert states(site.store) == {first: "starting", second: "running", third: "running"}
    code, body = site.healthz()
    assert code == 503
    assert body["status"] == "failing"
    assert "scheduler loop: the last failed step was 0 s ago" in str(body["reason"])
    assert "database is locked (injected)" in str(body["reason"])
    assert site.metric("railyard_loop_healthy") == 0
    assert site.metric("railyard_loop_last_failed_step_timestamp_seconds") == site.clock()
    # past its deadline the sweep starts it again: the executor hands back the running
    # attempt, so the row gets its handle and nothing runs twice
    site.clock.advance(31)
    report = site.loop.step()
    assert report.relaunched == [first]
    assert states(site.store) == {first: "running", second: "running", third: "running"}
    site.clock.advance(30)  # a minute after the failure: healthy again
    site.loop.step()
    code, body = site.healthz()
    assert (code, body["status"], body["reason"], body["stuck_jobs"]) == (200, "ok", None, 0)
    assert site.metric("railyard_loop_healthy") == 1
    site.finish(first, second, third)
    assert site.launches() == sorted(f"{j} 0" for j in (first, second, third))


def test_a_step_that_lost_one_race_is_run_again_at_once(site: Site) -> None:
    """A lost race for the store (here SQLite's busy answer, in the soak a PostgreSQL
    deadlock) is not a failed step: the step runs again at once, and /healthz stays green."""
    job_id = site.add()
    with failing_writes(site.store, FailingWrites(1)) as faults:
        assert site.loop.step_or_report() is not None
    assert faults.failed == 1
    assert states(site.store) == {job_id: "running"}
    assert site.healthz()[0] == 200
    site.finish(job_id)


def test_a_failed_step_fails_healthz_at_once_until_a_good_step(site: Site) -> None:
    job_id = site.add()
    # the step's own plan, and its one run again: nothing commits
    with failing_writes(site.store, FailingWrites(1, times=2)):
        assert site.loop.step_or_report() is None
    assert states(site.store) == {job_id: "pending"}
    code, body = site.healthz()
    assert code == 503
    assert body["failing_steps"] == 1
    assert str(body["reason"]).startswith("scheduler loop: the last failed step was 0 s ago")
    site.loop.step()  # the next step starts it: the loop has recovered, and says so at once
    assert states(site.store) == {job_id: "running"}
    code, body = site.healthz()
    assert (code, body["status"]) == (200, "ok")
    assert body["last_failed_t_s"] is not None  # the failure is still told, not as a fault
    site.finish(job_id)


def test_a_loop_behind_fails_healthz(site: Site) -> None:
    site.loop.step()
    assert site.healthz()[0] == 200
    site.clock.advance(16)  # more than 5 periods and the 15 s floor, no step ended
    code, body = site.healthz()
    assert code == 503
    assert "scheduler loop: behind: no step ended for 16 s" in str(body["reason"])
    assert body["behind_s"] == 16
    assert site.metric("railyard_loop_behind_seconds") == 16
    site.loop.step()
    assert site.healthz()[0] == 200


def test_a_refused_launch_goes_back_to_pending_then_fails_after_three(site: Site) -> None:
    store = site.store
    once, never, fine = site.add(), site.add(), site.add()
    site.executor.refusals.update({once: 1, never: 10})
    report = site.loop.step()
    assert report.started == [fine]
    assert states(store) == {once: "pending", never: "pending", fine: "running"}
    assert job(store, once).reason == f"LaunchFailed (try 1 of 3): ExecutorError: job {once}: " \
        "refused (injected)"  # fmt: skip
    assert job(store, once).placement is None
    site.loop.step()  # placed again: it starts, the other is refused a second time
    assert states(store)[once] == "running"
    site.loop.step()
    assert (job(store, never).state, job(store, never).reason) == (
        "failed",
        f"LaunchFailed after 3 tries: ExecutorError: job {never}: refused (injected)",
    )
    assert site.executor.refused == [once, never, never, never]
    site.finish(once, fine)
    assert site.launches() == sorted([f"{once} 0", f"{fine} 0"])


def _strand(store: Store, job_id: str, t_s: float, **values: object) -> None:
    """The row as a crash between the step's commit and its act leaves it."""
    with store.session() as session:
        session.execute(
            update(JobRow)
            .where(JobRow.id == job_id)
            .values(placement={NODE: [0]}, start_t_s=t_s, updated_t_s=t_s, **values)
        )


def test_a_starting_row_never_launched_is_started_exactly_once(site: Site) -> None:
    job_id = site.add()
    _strand(site.store, job_id, site.clock(), state="starting")
    site.loop.step()  # not yet past its deadline: it may still be launching
    assert states(site.store) == {job_id: "starting"}
    assert site.healthz()[0] == 200
    site.clock.advance(31)
    code, body = site.healthz()  # before the sweep: stuck, and which
    assert code == 503
    assert (body["stuck_jobs"], body["stuck"]) == (1, [job_id])
    assert f"1 job stuck past their deadline: 1 starting (ids {job_id})" in str(body["reason"])
    assert site.metric("railyard_loop_stuck_jobs", state="starting") == 1
    reports: list[StepReport] = []
    for _ in range(3):  # later sweeps find nothing to start
        reports.append(site.loop.step())
        site.clock.advance(6)
    assert [r.relaunched for r in reports] == [[job_id], [], []]
    assert states(site.store) == {job_id: "running"}
    site.finish(job_id)
    assert site.launches() == [f"{job_id} 0"]


@pytest.mark.parametrize(
    ("stuck", "settled"), [("cancelling", "cancelled"), ("preempting", "running")]
)
def test_a_stop_with_no_process_is_settled(site: Site, stuck: str, settled: str) -> None:
    job_id = site.add()
    t_s = site.clock()
    _strand(site.store, job_id, t_s, state=stuck, preempt_for="0", preempt_deadline_t_s=t_s)
    site.clock.advance(61)
    code, body = site.healthz()
    assert code == 503
    assert body["stuck"] == [job_id]
    assert f"1 job stuck past their deadline: 1 {stuck} (ids {job_id})" in str(body["reason"])
    report = site.loop.step()
    assert report.settled_stuck == [job_id]
    assert states(site.store) == {job_id: settled}
    # a preemption's end requeues the job, and the same step starts its next attempt
    assert job(site.store, job_id).restart_count == (1 if stuck == "preempting" else 0)
    code, body = site.healthz()
    assert (code, body["stuck_jobs"]) == (200, 0)
    assert site.metric("railyard_loop_stuck_jobs", state=stuck) == 0
