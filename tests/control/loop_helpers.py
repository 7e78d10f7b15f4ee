"""Helpers for driving the service loop directly: rows in, steps until a condition holds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

import railyard.control.loop.world as world
from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.tables import Counter, JobRow, NodeRow, QueueMember, QueueRow, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases import jobs
from railyard.exec.local import LocalExecutor
from railyard.exec.task.identity import Account
from railyard.sched import SchedulerConfig

NODE = "node0"
FLAVOR = "virtual"


def seed_cluster(
    store: Store,
    *,
    gpus: int = 4,
    queues: dict[str, int] | None = None,
    priority_preemption: bool = False,
) -> None:
    """One node, an admin and user 'alice', and queues (name -> nominal GPUs) under 'root'.
    Both users' jobs run as the Unix account running the tests (tests/control/test_identity.py
    runs jobs as other accounts)."""
    now = time.time()
    me = Account.current().name
    with store.session() as s:
        s.add(
            NodeRow(name=NODE, flavor=FLAVOR, gpus=gpus, path=["su0", "su0-lg0"], updated_t_s=now)
        )
        s.add(User(id=1, name="admin", is_admin=True, unix_user=me, created_t_s=now))
        s.add(User(id=2, name="alice", is_admin=False, unix_user=me, created_t_s=now))
        s.add(QueueRow(name="root", nominal_gpus={FLAVOR: gpus}, created_t_s=now))
        for name, nominal in (queues or {"default": gpus}).items():
            s.add(
                QueueRow(
                    name=name,
                    parent="root",
                    nominal_gpus={FLAVOR: nominal},
                    priority_preemption=priority_preemption,
                    created_t_s=now,
                )
            )
        s.flush()
        s.add(QueueMember(queue="root", user_id=2))
        s.add(Counter(name="job", value=0))


def add_job(store: Store, command: list[str], **fields: object) -> str:
    """Insert a pending job the way the API does; returns its id."""
    with store.session() as s:
        counter = s.get(Counter, "job")
        assert counter is not None
        counter.value += 1
        job_id = str(counter.value)
        values: dict[str, object] = {
            "id": job_id,
            "number": counter.value,
            "user_id": 2,
            "queue": "default",
            "command": command,
            "flavor": FLAVOR,
            "workers": 1,
            "gpus_per_worker": 1,
            "submit_t_s": time.time(),
            "updated_t_s": time.time(),
            "checkpoint_grace_s": 10.0,
        }
        values.update(fields)
        s.add(JobRow(**values))
    return job_id


def job(store: Store, job_id: str) -> JobRow:
    with store.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None
        return row


def states(store: Store) -> dict[str, str]:
    with store.session() as s:
        return {r.id: r.state for r in s.scalars(select(JobRow))}


def make_loop(store: Store, state_dir: Path, *, gpus: int = 4, **sched: object) -> Loop:
    config = LoopConfig(
        state_dir=state_dir, cycle_interval_s=0.1, scheduler=SchedulerConfig(**sched)
    )  # type: ignore[arg-type]
    return Loop(store, LocalExecutor(NODE, gpus=gpus, term_grace_s=2.0), config)


def step_until(service: Loop, done: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        service.step()
        if done():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


class Cluster:
    """A store with one 4-GPU node, the loop over it, and alice submitting as in the API."""

    def __init__(self, tmp_path: Path, gpus: int = 4) -> None:
        self.tmp = tmp_path
        self.store = Store(sqlite_url(tmp_path / "railyard.db"))
        seed_cluster(self.store, gpus=gpus)
        self.loop: Loop = make_loop(self.store, tmp_path, gpus=gpus)
        self.out = tmp_path / "out"
        self.out.mkdir()

    def submit(self, **fields: Any) -> list[str]:
        fields.setdefault("workdir", str(self.out))
        fields.setdefault("submit_dir", str(self.tmp))
        fields.setdefault("submit_host", "login-1")
        fields.setdefault("export", "ALL")
        fields.setdefault("env", {"PATH": "/usr/bin:/bin", "FROM_SUBMITTER": "yes"})
        with self.store.session() as session:
            alice = session.get(User, 2)
            assert alice is not None
            rows = jobs.submit(
                session, alice, JobSubmit(**fields), time.time(), spool_dir=self.tmp / "jobs"
            )
            return [r.id for r in rows]

    def run(self, *job_ids: str, timeout_s: float = 120) -> None:
        step_until(
            self.loop,
            lambda: all(states(self.store)[j] in ("completed", "failed") for j in job_ids),
            timeout_s=timeout_s,
        )
        for job_id in job_ids:
            assert states(self.store)[job_id] == "completed", self.log(job_id)

    def log(self, job_id: str) -> str:
        with self.store.session() as session:
            row = session.get(JobRow, job_id)
            assert row is not None
            paths = [w["log_path"] for w in (row.handle or {}).get("workers", [])]
        return "\n".join(Path(p).read_text() for p in paths if Path(p).exists())

    def env(self, name: str) -> dict[str, str]:
        data: dict[str, str] = json.loads((self.out / f"{name}.json").read_text())
        return data


def stop_all(service: Loop, timeout_s: float = 30.0) -> None:
    """Cancel every job the loop's executor runs and wait until they are reaped."""
    for job_id in list(service.executor.running()):
        service.executor.cancel(job_id)
    deadline = time.monotonic() + timeout_s
    while service.executor.running() and time.monotonic() < deadline:
        service.executor.poll()
        time.sleep(0.05)


class Conversions:
    """How many job rows, running rows and node rows `control.world` converts (its module's
    converters counted in place)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.jobs = self.running = self.nodes = 0
        job, running, node = world.job_of_columns, world.to_running, world.to_node

        def count_job(*a: Any) -> Any:
            self.jobs += 1
            return job(*a)

        def count_running(*a: Any) -> Any:
            self.running += 1
            return running(*a)

        def count_node(*a: Any) -> Any:
            self.nodes += 1
            return node(*a)

        monkeypatch.setattr(world, "job_of_columns", count_job)
        monkeypatch.setattr(world, "to_running", count_running)
        monkeypatch.setattr(world, "to_node", count_node)

    def reset(self) -> None:
        self.jobs = self.running = self.nodes = 0
