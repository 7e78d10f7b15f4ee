"""``scancel --signal``: the request is stored by compare-and-set on a running job, the loop
sends it to the job's processes once and clears it; a pending or finished job is 409, a bad
signal 422, another user's job 404."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.control.loop_helpers import Cluster, states, step_until, stop_all

from railyard.control.errors import Conflict, NotFound
from railyard.control.schemas import JobSignal
from railyard.control.store.tables import JobRow, User
from railyard.control.usecases.jobsignal import signal_job, signals_to_send

TRAP = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGUSR2, lambda *_: (print('got USR2', flush=True), sys.exit(0)))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
    "sys.exit(5)\n"
)


def test_a_signal_reaches_the_running_job_once(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    [job_id] = cluster.submit(command=["python3", "-c", TRAP], gpus=0, name="trap")
    [held] = cluster.submit(command=["true"], gpus=0, hold=True)
    try:
        # a line of its own: the log's header line holds the command, words and all
        step_until(cluster.loop, lambda: "ready" in cluster.log(job_id).splitlines())
        with cluster.store.session() as session:
            alice = session.get_one(User, 2)
            with pytest.raises(Conflict, match=r"^job 2 is pending: only a running job"):
                signal_job(session, alice, held, "SIGUSR2", time.time())
            signalled = signal_job(session, alice, job_id, "SIGUSR2", time.time())
            assert [row.id for row, _ in signalled] == [job_id]
        ended = ("completed", "failed", "cancelled", "timeout")
        step_until(cluster.loop, lambda: states(cluster.store)[job_id] in ended, timeout_s=120)
        assert (states(cluster.store)[job_id], "got USR2" in cluster.log(job_id).splitlines()) == (
            "completed",
            True,
        ), cluster.log(job_id)
        with cluster.store.session() as session:
            assert session.get_one(JobRow, job_id).signal_request is None
            assert signals_to_send(session) == []
    finally:
        stop_all(cluster.loop)


def test_another_users_job_is_not_found(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    with cluster.store.session() as session:
        session.add(User(id=3, name="bob", is_admin=False, unix_user="bob", created_t_s=0.0))
    [job_id] = cluster.submit(command=["true"], gpus=0)
    with cluster.store.session() as session:
        bob = session.get_one(User, 3)
        with pytest.raises(NotFound):
            signal_job(session, bob, job_id, "SIGUSR1", time.time())


@pytest.mark.parametrize(
    ("written", "stored"), [("USR1", "SIGUSR1"), ("sigterm", "SIGTERM"), ("10", "SIGUSR1")]
)
def test_scancel_spellings(written: str, stored: str) -> None:
    assert JobSignal(signal=written).signal == stored


@pytest.mark.parametrize("written", ["B:USR1", "USR1@30", "NOPE", ""])
def test_a_bad_signal_is_refused(written: str) -> None:
    with pytest.raises(ValueError, match="signal"):
        JobSignal(signal=written)
