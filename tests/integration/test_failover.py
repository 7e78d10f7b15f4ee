"""Two `railyard up --standby` on one PostgreSQL database (issue 55, items 6-7): kill -9 the
active, freeze it (SIGSTOP) past its lease and let it go on, end its database sessions
(``pg_terminate_backend``); every job runs exactly once, in its first attempt (each writes an
O_EXCL marker per job and attempt: a second run of any attempt would fail to create it and
leave a second file for attempt + 1), epochs only grow, and a stale active's writes change
nothing (it steps down, exit 75). SQLite refuses ``--standby`` in one line.

Real servers, the real local executor (the servers share one state directory and spool, as
two servers of one machine do), real PostgreSQL. One kill -9 round runs in the main tier;
three rounds and the other faults are ``slow``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from railyard.client.client import Client
from tests.control.conftest import PG_URL, fresh_pg_database
from tests.integration.server_proc import ServerProcess, free_port

pytestmark = [pytest.mark.stores, pytest.mark.long]

# Creates marker-<job>-<attempt> with O_EXCL (fails if that attempt ran before), then sleeps.
STEP_DOWN_EXIT = 75  # `railyard up` lost its lease and stepped down (EX_TEMPFAIL)
JOB = (
    "import os, sys, time; "
    "name = f\"marker-{os.environ['RAILYARD_JOB_ID']}-{os.environ['RAILYARD_RESTART_COUNT']}\"; "
    "open(os.path.join(sys.argv[1], name), 'x').close(); time.sleep(float(sys.argv[2]))"
)
WAIT_S = 90.0  # a loaded machine starts servers slowly: generous, never assumed


def wait_for(what: Callable[[], Any], timeout_s: float = WAIT_S, why: str = "") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:.0f} s: {why}")


class Pair:
    """Two standby-capable servers on one database, state directory and spool."""

    def __init__(self, tmp_path: Path, url: str) -> None:
        self.url, self.markers = url, tmp_path / "markers"
        self.markers.mkdir()
        state = tmp_path / "state"
        state.mkdir()
        self.servers = [
            ServerProcess(
                state,
                gpus=0,
                database_url=url,
                port=free_port(),
                extra=("--standby", "--cpus", "8"),
            )
            for _ in range(2)
        ]
        self.engine: Engine = create_engine(url, pool_pre_ping=True)
        self.epochs_seen: list[int] = []

    @property
    def urls(self) -> str:
        return ",".join(s.url for s in self.servers)

    def start(self, server: ServerProcess) -> None:
        server.start(timeout_s=WAIT_S, any_health=True)

    def active(self) -> ServerProcess | None:
        """The server whose /healthz answers 200 (a standby answers 503)."""
        for server in self.servers:
            if server.proc is None or server.proc.poll() is not None:
                continue
            try:
                if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                    return server
            except httpx.HTTPError:
                continue
        return None

    def other(self, server: ServerProcess) -> ServerProcess:
        return next(s for s in self.servers if s is not server)

    def client(self) -> Client:
        return Client(self.urls, self.servers[0].token, timeout_s=10)

    def submit(self, count: int, sleep_s: float) -> list[str]:
        with self.client() as client:
            return [
                client.submit(
                    {"command": [sys.executable, "-c", JOB, str(self.markers), str(sleep_s)]}
                )[0]["id"]
                for _ in range(count)
            ]

    def lease(self) -> tuple[int, str]:
        with self.engine.connect() as conn:
            epoch, owner = conn.execute(text("SELECT epoch, owner FROM leases")).one()
        self.epochs_seen.append(int(epoch))
        return int(epoch), str(owner)

    def takeover(self, old_epoch: int, by: ServerProcess) -> float:
        """Wait until ``by`` serves as the active one with a greater epoch; seconds taken."""
        began = time.monotonic()
        wait_for(lambda: self.lease()[0] > old_epoch and self.active() is by, why="takeover")
        return time.monotonic() - began

    def states(self, ids: list[str]) -> dict[str, str]:
        with self.client() as client:
            return {j["id"]: j["state"] for j in client.jobs() if j["id"] in ids}

    def all_done(self, ids: list[str]) -> None:
        def done() -> bool:
            states = self.states(ids)
            return len(states) == len(ids) and all(
                s in ("completed", "failed", "cancelled") for s in states.values()
            )

        wait_for(done, WAIT_S * 2, why=f"jobs to end: {self.states(ids)}")

    def check_once(self, ids: list[str]) -> None:
        """Each job completed, exactly one marker each, attempt 0; epochs only grew."""
        states = self.states(ids)
        assert set(states.values()) == {"completed"}, states
        markers = sorted(p.name for p in self.markers.iterdir())
        assert markers == sorted(f"marker-{j}-0" for j in ids), markers
        with self.engine.connect() as conn:
            epochs = [r[0] for r in conn.execute(text("SELECT epoch FROM lease_epochs ORDER BY "
                                                      "acquired_t_s, epoch"))]  # fmt: skip
        assert epochs == sorted(epochs)
        assert len(set(epochs)) == len(epochs)
        assert self.epochs_seen == sorted(self.epochs_seen)

    def stop(self) -> None:
        for server in self.servers:
            if server.proc is not None and server.proc.poll() is None:
                with_signal(server, signal.SIGCONT)
            server.stop()
        self.engine.dispose()


def with_signal(server: ServerProcess, sig: signal.Signals) -> None:
    assert server.proc is not None
    os.kill(server.proc.pid, sig)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    with fresh_pg_database() as url:
        pair = Pair(tmp_path, url)
        try:
            pair.start(pair.servers[0])
            wait_for(lambda: pair.active() is pair.servers[0], why="the first server active")
            pair.start(pair.servers[1])  # a standby: its /healthz answers 503
            yield pair
        finally:
            pair.stop()


def kill9_round(pair: Pair, jobs: int = 6, sleep_s: float = 4.0) -> list[str]:
    active = pair.active()
    assert active is not None
    epoch, _ = pair.lease()
    ids = pair.submit(jobs, sleep_s)
    wait_for(lambda: any(p.name.startswith("marker-") for p in pair.markers.iterdir()),
             why="a job to start")  # fmt: skip
    active.kill9()
    standby = pair.other(active)
    pair.takeover(epoch, standby)
    pair.start(active)  # back, as a standby now
    assert pair.active() is standby
    return ids


def test_kill9_of_the_active_the_standby_adopts_and_every_job_runs_once(pair: Pair) -> None:
    ids = kill9_round(pair)
    pair.all_done(ids)
    pair.check_once(ids)
    assert pair.lease()[0] == 2


@pytest.mark.slow
def test_three_kill9_rounds(pair: Pair) -> None:
    ids: list[str] = []
    for _ in range(3):
        ids += kill9_round(pair)
    pair.all_done(ids)
    pair.check_once(ids)
    assert pair.lease()[0] == 4


def _snapshot(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return [
            list(conn.execute(text("SELECT jobs::text FROM jobs ORDER BY id"))),
            conn.execute(text("SELECT count(*), max(id) FROM events")).one(),
            list(conn.execute(text("SELECT nodes::text FROM nodes ORDER BY name"))),
        ]


@pytest.mark.slow
def test_a_frozen_active_is_taken_over_and_its_writes_change_nothing(pair: Pair) -> None:
    stale = pair.active()
    assert stale is not None
    epoch, _ = pair.lease()
    ids = pair.submit(8, 6.0)
    wait_for(lambda: len(list(pair.markers.iterdir())) >= 2, why="jobs to start")
    with_signal(stale, signal.SIGSTOP)
    fresh = pair.other(stale)
    took_s = pair.takeover(epoch, fresh)
    assert took_s < 30, took_s
    # Freeze the new active too: whatever changes now is the stale server's doing.
    with_signal(fresh, signal.SIGSTOP)
    before = _snapshot(pair.engine)
    with_signal(stale, signal.SIGCONT)
    assert stale.proc is not None
    assert stale.proc.wait(timeout=WAIT_S) == STEP_DOWN_EXIT
    assert _snapshot(pair.engine) == before
    with_signal(fresh, signal.SIGCONT)
    assert pair.lease()[0] == epoch + 1
    pair.start(stale)  # back, as a standby
    pair.all_done(ids)
    pair.check_once(ids)


@pytest.mark.slow
def test_ended_sessions_of_the_active_lose_nothing(pair: Pair) -> None:
    active = pair.active()
    assert active is not None
    assert active.proc is not None
    ids = pair.submit(8, 3.0)
    for _ in range(3):
        time.sleep(1.0)
        with pair.engine.connect() as conn:
            conn.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE application_name LIKE :mine"),
                {"mine": f"railyard %/{active.proc.pid}/%"},
            )  # fmt: skip
    pair.all_done(ids)
    pair.check_once(ids)
    assert pair.active() is not None


def test_standby_on_sqlite_is_refused_in_one_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "railyard", "up", "--standby", "--state-dir",
               str(tmp_path / "s"), "--port", str(free_port())]  # fmt: skip
    env = {**os.environ, "RAILYARD_HOME": str(tmp_path)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert "--standby: needs a PostgreSQL store" in done.stderr
    assert not (tmp_path / "s").exists()


def test_a_second_up_without_standby_is_refused_naming_the_active(pair: Pair) -> None:
    """The lease replaces the advisory lock: without --standby, a live active refuses."""
    other = subprocess.run(
        [sys.executable, "-m", "railyard", "up", "--gpus", "0", "--state-dir",
         str(pair.markers.parent / "other"), "--port", str(free_port()), "--database-url",
         pair.url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert other.returncode == 2, other.stdout + other.stderr
    assert "is in use by another railyard server (railyard pid " in other.stderr
    assert json.loads((pair.servers[0].state_dir / "client.json").read_text())["token"]


def test_a_second_up_is_refused_after_the_actives_sessions_were_ended(tmp_path: Path) -> None:
    """Issue 55, item 6: the advisory lock was a session's: ``pg_terminate_backend`` freed it
    and a second server started beside the first. The lease is a row: still refused."""
    with fresh_pg_database() as url:
        first = ServerProcess(tmp_path / "a", gpus=0, database_url=url)
        first.state_dir.mkdir()
        first.start(timeout_s=WAIT_S)
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                ended = conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).scalar_one()
            assert ended >= 1
            second = ServerProcess(tmp_path / "b", gpus=0, database_url=url)
            second.state_dir.mkdir()
            try:
                with pytest.raises(RuntimeError, match="is in use by another railyard server"):
                    second.start(timeout_s=WAIT_S)
            finally:
                second.stop()  # today's code started it beside the first
            assert first.request("GET", "/healthz")["status"] == "ok"
        finally:
            first.stop()
            engine.dispose()


def _outage(url: str, allow: bool) -> None:
    """This database only stops (or resumes) taking connections, and its sessions end: a
    restart of the database server as its clients see it, without stopping the others'."""
    name = make_url(url).database
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allow).lower()}'))
        if not allow:
            conn.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :d"),
                {"d": name},
            )
    admin.dispose()


@pytest.mark.slow
def test_the_active_rides_through_a_database_outage(pair: Pair) -> None:
    """20 s without the database: clients get 503 with Retry-After and one line, never a
    500; the loop and the lease resume by themselves; every job runs once."""
    active = pair.active()
    assert active is not None
    epoch, _ = pair.lease()
    ids = pair.submit(6, 3.0)
    wait_for(lambda: any(pair.markers.iterdir()), why="a job to start")
    _outage(pair.url, allow=False)
    try:
        answers = []
        ended = time.monotonic() + 20
        while time.monotonic() < ended:
            for path in ("/v1/jobs", "/healthz"):
                answers.append(active.call("GET", path))
            answers.append(active.call("POST", "/v1/jobs", json={"command": ["true"]}))
            time.sleep(1.0)
    finally:
        _outage(pair.url, allow=True)
    refused = [r for r in answers if r.status_code != 200]
    assert refused, "the database was away: something must have been refused"
    for response in refused:
        assert response.status_code == 503, response.text
        if response.url.path == "/healthz":  # the health answer: failing, with why
            assert response.json()["status"] == "failing", response.text
            continue
        assert response.headers.get("retry-after"), (response.url, response.headers)
        assert "\n" not in response.json()["detail"]
    pair.all_done(ids)
    pair.check_once(ids)
    assert pair.active() is not None
    assert pair.lease()[0] >= epoch
    log = (active.state_dir / "server.log").read_text()
    assert "Traceback" not in log, log[-3000:]
