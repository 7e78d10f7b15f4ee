"""The loop isolates failure and keeps its steps short (issue 52): an exception while handling
one job (converting its row, launching it, settling its exit) holds or ends that job with a
``SchedulerError`` reason and the step goes on for everyone else, /healthz says "degraded",
not "failing"; a step launches for at most its budget, so a job cancelled while it waits in
STARTING is never launched; the start recorded is the launch's own time; /healthz fails when
no job started for the stall time while some could, and says a recovery at once. Real
processes (LocalExecutor), real stores (SQLite and PostgreSQL), a clock the test moves."""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from tests.control.faults import Clock
from tests.control.loop_helpers import NODE, add_job, job, seed_cluster, states, step_until
from tests.control.metrics_helpers import samples, value

import railyard.control.loop.apply as apply
from railyard.control.api.app import create_app
from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.metrics.prometheus import MetricsConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, User
from railyard.control.usecases.jobs import cancel_job
from railyard.exec.local import LocalExecutor
from railyard.exec.protocol import Executor, JobHandle, LaunchSpec

# Append "<job> <attempt>" to argv[1], then run until argv[2] exists (at most a minute).
RUN = """
import os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(f"{os.environ['RAILYARD_JOB_ID']} {os.environ['RAILYARD_RESTART_COUNT']}\\n")
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.05)
"""
ENDED = ("completed", "failed", "cancelled")


class RaisingExecutor:
    """A real `LocalExecutor` whose start raises a bug's exception (not a refusal) for the
    jobs in ``broken``, and counts every launch it makes."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.broken: set[str] = set()
        self.launched: list[str] = []

    def start(self, spec: LaunchSpec) -> JobHandle:
        if spec.job_id in self.broken:
            raise RuntimeError(f"injected bug for job {spec.job_id}\nsecond line")
        self.launched.append(spec.job_id)
        return self.inner.start(spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Site:
    """One 4-GPU node, a loop on a test clock, and /healthz and /metrics over HTTP."""

    def __init__(self, store: Store, tmp_path: Path, **config: Any) -> None:
        seed_cluster(store, gpus=4)
        self.store, self.clock = store, Clock()
        self.executor = RaisingExecutor(LocalExecutor(NODE, gpus=4, term_grace_s=2.0))
        loop_config = LoopConfig(state_dir=tmp_path, cycle_interval_s=0.1, **config)
        self.loop = Loop(store, self.executor, loop_config, clock=self.clock)  # type: ignore[arg-type]
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

    def add(self, **fields: Any) -> str:
        command = [sys.executable, "-c", RUN, str(self.out), str(self.release)]
        return add_job(self.store, command, **{"gpus_per_worker": 0, **fields})

    def healthz(self) -> tuple[int, dict[str, Any]]:
        response = self.http.get("/healthz")
        return response.status_code, response.json()

    def metric(self, name: str) -> float:
        return value(samples(self.http.get("/metrics").text), name)

    def settle(self, *job_ids: str, timeout_s: float = 90) -> None:
        self.release.touch()
        step_until(
            self.loop, lambda: all(states(self.store)[j] in ENDED for j in job_ids), timeout_s
        )

    def launches(self) -> list[str]:
        return sorted(self.out.read_text().splitlines()) if self.out.exists() else []


@pytest.fixture
def site(store: Store, tmp_path: Path) -> Iterator[Site]:
    made = Site(store, tmp_path)
    yield made
    made.release.touch()
    for job_id in list(made.executor.running()):
        made.executor.cancel(job_id)


def _held(store: Store, job_id: str) -> tuple[str, str | None, str]:
    row = job(store, job_id)
    return row.state, row.hold, row.reason


def test_a_launch_that_raises_holds_that_job_and_the_step_goes_on(site: Site) -> None:
    first, bad, last = site.add(), site.add(), site.add()
    site.executor.broken.add(bad)
    report = site.loop.step()
    assert report.started == [first, last]
    reason = f"SchedulerError: RuntimeError: injected bug for job {bad}"
    assert _held(site.store, bad) == ("pending", "admin", reason)
    assert job(site.store, bad).placement is None
    site.loop.step()  # the cycle's reasons leave the error's in place while it is held
    assert job(site.store, bad).reason == reason
    code, body = site.healthz()
    assert (code, body["status"], body["held_jobs"], body["held"]) == (200, "degraded", 1, [bad])
    assert f"1 job held for a SchedulerError (ids {bad}" in body["reason"]
    assert site.metric("railyard_loop_held_jobs") == 1
    assert site.metric("railyard_loop_healthy") == 1
    site.settle(first, last)
    assert states(site.store) == {first: "completed", bad: "pending", last: "completed"}
    assert site.launches() == sorted([f"{first} 0", f"{last} 0"])


def test_a_row_that_cannot_be_read_is_held_and_the_others_run(site: Site) -> None:
    first = site.add()
    bad = site.add(topology_level="no-such-level")  # no release of ours writes it
    last = site.add()
    report = site.loop.step()
    assert report.started == [first, last]
    state, hold, reason = _held(site.store, bad)
    assert (state, hold) == ("pending", "admin")
    assert reason.startswith("SchedulerError: ValueError: "), reason
    for _ in range(3):  # held once; the steps after it go on untroubled
        assert site.loop.step_or_report() is not None
    assert site.loop.health.failing_steps == 0
    code, body = site.healthz()
    assert (code, body["status"], body["held"]) == (200, "degraded", [bad])
    site.settle(first, last)
    assert site.launches() == sorted([f"{first} 0", f"{last} 0"])


def test_a_settlement_that_raises_ends_that_job_alone(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, bad, last = site.add(), site.add(), site.add()
    assert site.loop.step().started == [first, bad, last]
    settle = apply._settle

    def buggy(session: Any, s: Any, *args: Any) -> bool:
        if s.job_id == bad:
            raise KeyError(f"injected {bad}")
        return settle(session, s, *args)

    monkeypatch.setattr(apply, "_settle", buggy)
    site.settle(first, bad, last)
    assert states(site.store) == {first: "completed", bad: "failed", last: "completed"}
    assert job(site.store, bad).reason == f"SchedulerError: KeyError: 'injected {bad}'"
    assert site.loop.health.failing_steps == 0
    assert site.healthz()[0] == 200


def test_a_step_launches_within_its_budget_and_a_cancel_in_between_holds(
    store: Store, tmp_path: Path
) -> None:
    site = Site(store, tmp_path, launch_budget_s=0.0)  # one launch a step
    try:
        ids = [site.add() for _ in range(4)]
        decided_t_s = site.clock()
        report = site.loop.step()
        assert report.started == ids[:1]
        assert [states(store)[j] for j in ids] == ["running", "starting", "starting", "starting"]
        with store.session() as session:  # alice cancels a job still waiting for its launch
            alice = session.get(User, 2)
            assert alice is not None
            cancel_job(session, alice, ids[2], site.clock())
        site.clock.advance(5)
        assert site.loop.step().started == [ids[1]]
        assert job(store, ids[1]).start_t_s == decided_t_s + 5  # its launch, not the decision
        step_until(site.loop, lambda: states(store)[ids[2]] == "cancelled")
        step_until(site.loop, lambda: states(store)[ids[3]] == "running")
        site.settle(ids[0], ids[1], ids[3])
        assert ids[2] not in site.executor.launched
        assert site.launches() == sorted(f"{j} 0" for j in (ids[0], ids[1], ids[3]))
    finally:
        site.release.touch()


def test_healthz_fails_while_no_job_starts_and_says_the_recovery_at_once(
    store: Store, tmp_path: Path
) -> None:
    site = Site(store, tmp_path, launch_budget_s=0.0)
    try:
        ids = [site.add() for _ in range(3)]
        site.loop.step()  # one launched, two wait for the next steps
        site.clock.advance(31)
        code, body = site.healthz()
        assert code == 503
        assert "scheduler loop: no job started for 31 s while 2 could start" in body["reason"]
        site.loop.step()  # a launch: the stall is over, and /healthz says so at once
        assert "no job started" not in str(site.healthz()[1]["reason"])
        site.loop.step()  # the last one waiting (past STARTING's deadline: stuck till now)
        code, body = site.healthz()
        assert (code, body["status"]) == (200, "ok"), body
        site.settle(*ids)
    finally:
        site.release.touch()


def test_recovery_launches_nothing_before_the_steps_do(store: Store, tmp_path: Path) -> None:
    """A restart finds rows decided STARTING: recovery (before the port listens) only queues
    them; the steps launch them, a budget's worth each, each exactly once."""
    site = Site(store, tmp_path, launch_budget_s=0.0)
    try:
        ids = [site.add(gpus_per_worker=1) for _ in range(3)]
        with store.session() as session:  # as a crash between the commit and the act leaves them
            for gpu, job_id in enumerate(ids):
                session.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id)
                    .values(state="starting", placement={NODE: [gpu]}, start_t_s=site.clock())
                )
        assert site.loop.reconcile() == []
        assert site.executor.launched == []
        assert set(states(store).values()) == {"starting"}
        assert site.loop.step().started == ids[:1]
        assert site.loop.step().started == ids[1:2]
        site.settle(*ids)
        assert set(states(store).values()) == {"completed"}
        assert site.launches() == sorted(f"{j} 0" for j in ids)
    finally:
        site.release.touch()


@pytest.mark.slow
def test_soak_with_exceptions_in_random_jobs_handling(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seeded: 40 short jobs, a random fifth whose launch raises, another whose settlement
    raises; the loop never stalls, every other job runs and completes exactly once."""
    rng = random.Random(52)
    site = Site(store, tmp_path, launch_budget_s=0.05)
    try:
        ids = [site.add() for _ in range(40)]
        bad_start = set(rng.sample(ids, 8))
        bad_settle = set(rng.sample([j for j in ids if j not in bad_start], 8))
        site.executor.broken |= bad_start
        settle = apply._settle

        def buggy(session: Any, s: Any, *args: Any) -> bool:
            if s.job_id in bad_settle:
                raise RuntimeError("injected")
            return settle(session, s, *args)

        monkeypatch.setattr(apply, "_settle", buggy)
        site.release.touch()  # each job ends as soon as it runs
        good = [j for j in ids if j not in bad_start]
        step_until(site.loop, lambda: all(states(store)[j] in ENDED for j in good), 180)
        assert site.loop.health.failing_steps == 0
        final = states(store)
        assert {j for j in ids if final[j] == "pending"} == bad_start
        assert {j for j in ids if final[j] == "failed"} == bad_settle
        assert {j for j in good if final[j] == "completed"} == set(good) - bad_settle
        runs = Counter(line.split()[0] for line in site.launches())
        assert runs == Counter({j: 1 for j in good})  # exactly once each, none of the held
        assert site.healthz()[1]["held_jobs"] == len(bad_start)
    finally:
        site.release.touch()
