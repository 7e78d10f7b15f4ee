"""The PostgreSQL lease fences a stale active in the database (issue 55, items 6-7): a loop
step of a server whose epoch was taken over commits nothing, and the server knows it lost;
a live lease refuses a second holder, a lapsed one (or one whose holder died on this
machine) is taken with a greater epoch, and the takeover waits for a commit in flight.
Real PostgreSQL, a real loop over a real LocalExecutor."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, text
from tests.control.conftest import fresh_pg_database
from tests.control.faults import Clock
from tests.control.loop_helpers import NODE, add_job, seed_cluster

from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store, process_identity
from railyard.control.store.lease import Lease, NotLeaseHolder
from railyard.control.store.tables import Counter, JobRow
from railyard.exec.local import LocalExecutor

pytestmark = pytest.mark.stores


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_pg_database() as url:
        yield url


def _lease(url: str, name: str) -> Lease:
    return Lease(url, f"pid 0, {name}", f"http://{name}", identity=f"elsewhere/b/{name}/1")


def _lapse(url: str) -> None:
    """The lease's time runs out now (a holder frozen past it), by the database's clock."""
    store = Store(url)
    with store.session() as session:
        session.execute(text("UPDATE leases SET expires_t_s = expires_t_s - 3600"))
    store.close()


def test_a_loop_step_with_a_stale_epoch_commits_nothing(pg_url: str, tmp_path: Path) -> None:
    store = Store(pg_url)
    a, b = _lease(pg_url, "a"), _lease(pg_url, "b")
    try:
        assert a.acquire() is None
        assert a.epoch == 1
        store.fence_with(a.check)
        seed_cluster(store, gpus=4)
        job_id = add_job(store, ["sleep", "30"])
        _lapse(pg_url)
        assert b.acquire() is None
        assert b.epoch == 2
        executor = LocalExecutor(NODE, gpus=4, term_grace_s=2.0)
        loop = Loop(store, executor, LoopConfig(state_dir=tmp_path), clock=Clock())
        assert loop.step_or_report() is None  # the step failed: its commit was refused
        with store.session() as session:
            row = session.get(JobRow, job_id)
            assert row is not None
            assert (row.state, row.handle, row.start_t_s) == ("pending", None, None)
        assert executor.running() == set()  # nothing launched either
        assert a.lost
        assert not a.valid()
        with pytest.raises(NotLeaseHolder), store.session() as session:
            session.add(Counter(name="stale", value=1))
        with store.session() as session:
            assert session.get(Counter, "stale") is None
            assert session.scalars(select(JobRow.state)).all() == ["pending"]
        assert a.renew() is False
        assert b.renew() is True
    finally:
        for lease in (a, b):
            lease.close()
        store.close()


def test_a_live_lease_is_refused_and_a_lapsed_one_taken_with_a_greater_epoch(
    pg_url: str,
) -> None:
    a, b = _lease(pg_url, "a"), _lease(pg_url, "b")
    a.migrate()
    try:
        assert a.acquire() is None
        held = b.acquire()
        assert held is not None
        assert (held.owner, held.epoch, held.url) == ("pid 0, a", 1, "http://a")
        assert a.renew() is True
        _lapse(pg_url)
        assert b.acquire() is None
        assert b.epoch == 2
        assert a.renew() is False
        assert a.lost
        with Store(pg_url).engine.connect() as conn:
            epochs = conn.execute(text("SELECT epoch, owner FROM lease_epochs ORDER BY epoch"))
            assert [tuple(r) for r in epochs] == [(1, "pid 0, a"), (2, "pid 0, b")]
    finally:
        a.close()
        b.close()


def test_a_dead_holder_on_this_machine_is_taken_over_at_once(pg_url: str) -> None:
    """The holder names a process of this machine and boot that no longer runs (kill -9: here
    this pid with another start time): no need to wait for its lease to lapse. A live holder
    of this machine (this very process) is not."""
    here = process_identity()
    dead = Lease(pg_url, "pid 1, dead", "http://dead", identity=here.rsplit("/", 1)[0] + "/1")
    alive_here = Lease(pg_url, "pid 2, alive", "http://alive")
    other = _lease(pg_url, "other")
    dead.migrate()
    try:
        assert dead.acquire() is None
        assert alive_here.acquire() is None
        assert alive_here.epoch == 2
        held = other.acquire()
        assert held is not None
        assert held.owner == "pid 2, alive"
    finally:
        for lease in (dead, alive_here, other):
            lease.close()


def test_a_takeover_waits_for_a_commit_in_flight_and_that_commit_counts(pg_url: str) -> None:
    store = Store(pg_url)
    a, b = _lease(pg_url, "a"), _lease(pg_url, "b")
    try:
        assert a.acquire() is None
        store.fence_with(a.check)
        _lapse(pg_url)
        taken = threading.Event()

        def take_over() -> None:
            if b.acquire() is None:
                taken.set()

        with store.session() as session:
            session.add(Counter(name="in-flight", value=1))
            session.flush()
            a.check(session)  # the fence passed and holds the row FOR KEY SHARE...
            thread = threading.Thread(target=take_over)
            thread.start()
            time.sleep(0.5)
            assert not taken.is_set()  # ...so the takeover waits for this commit
        thread.join(timeout=10)
        assert taken.is_set()
        assert b.epoch == 2
        with store.session() as session:
            assert session.get(Counter, "in-flight") is not None
    finally:
        a.close()
        b.close()
        store.close()
