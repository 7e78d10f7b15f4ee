"""High availability on PostgreSQL (issue 55, items 6-7): how long a standby takes over, and
what the jobs and the clients meet meanwhile.

Two ``railyard up --standby`` on one fresh PostgreSQL database, one state directory and spool
(two servers of one machine, the local executor), as ``tests/integration/test_failover.py``
sets them up. A client with both URLs (``RAILYARD_URL=a,b``) submits a job every 0.25 s all
along; each job creates an O_EXCL marker ``marker-<job>-<attempt>`` and sleeps 2 s. Faults,
each a few rounds, each on whichever server is active:

- ``kill -9``: takeover = from the kill to the other server's ``/healthz`` answering 200;
- ``SIGSTOP`` past the lease, then ``SIGCONT``: takeover likewise; the stale server must exit
  75 (stepped down) having committed nothing;
- killed sessions (``pg_terminate_backend`` of every session of the active): no takeover is
  due (the lease is a row, it outlives its sessions); recovery = until a submit succeeds;
- a database restart under load (``pg_ctlcluster --skip-systemctl-redirect 15 main restart``,
  or stopped for ``--db-down-s`` and started again): the 503s a client polling every 0.2 s
  saw (each with ``Retry-After``?), any 500, and how long until a submit succeeded again.

At the end: jobs lost (not completed) and run twice (more than one marker, or attempt > 0).
Run as root: ``python benchmarks/bench_failover.py [--rounds 3] [--no-db-restart]``; prints a
table and writes ``benchmarks/results/bench_failover.json``.
"""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.control.conftest import PG_URL
from tests.integration.server_proc import ServerProcess
from tests.integration.test_failover import JOB, STEP_DOWN_EXIT, Pair, wait_for, with_signal

from railyard.client.client import ClientError

RESULTS = Path(__file__).parent / "results" / "bench_failover.json"
CLUSTERS = Path("/etc/postgresql")  # one directory per installed version
PG_VERSION = max(p.name for p in CLUSTERS.iterdir()) if CLUSTERS.is_dir() else "15"


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new database for the run, dropped afterwards; its admin connections are checked
    before use, as the database server restarts in between."""
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    name = f"railyard_bench_{secrets.token_hex(4)}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


class Load:
    """A client with every server's URL, submitting a marker job every 0.25 s."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.ids: list[str] = []
        self.errors: list[str] = []
        self.latency_s: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.pair.client() as client:
            command = [sys.executable, "-c", JOB, str(self.pair.markers), "2"]
            while not self.stop.wait(0.25):
                began = time.monotonic()
                try:
                    self.ids.append(client.submit({"command": command})[0]["id"])
                except ClientError as exc:
                    self.errors.append(exc.detail)
                self.latency_s.append(time.monotonic() - began)


def active_of(pair: Pair) -> ServerProcess:
    return wait_for(pair.active, why="an active server")  # type: ignore[no-any-return]


def until_active(pair: Pair, server: ServerProcess, began: float) -> float:
    wait_for(lambda: pair.active() is server, why="takeover")
    return time.monotonic() - began


def kill9(pair: Pair) -> float:
    active = active_of(pair)
    other = pair.other(active)
    began = time.monotonic()
    active.kill9()
    took_s = until_active(pair, other, began)
    pair.start(active)
    return took_s


def sigstop(pair: Pair) -> float:
    active = active_of(pair)
    other = pair.other(active)
    began = time.monotonic()
    with_signal(active, signal.SIGSTOP)
    took_s = until_active(pair, other, began)
    with_signal(active, signal.SIGCONT)
    assert active.proc is not None
    code = active.proc.wait(timeout=120)
    assert code == STEP_DOWN_EXIT, f"the stale server exited {code}"
    pair.start(active)
    return took_s


def killed_sessions(pair: Pair, load: Load) -> float:
    active = active_of(pair)
    assert active.proc is not None
    done = len(load.ids)
    began = time.monotonic()
    with pair.engine.connect() as conn:
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name LIKE :mine"
            ),
            {"mine": f"railyard %/{active.proc.pid}/%"},
        )
    wait_for(lambda: len(load.ids) > done and pair.active() is not None, why="a submit")
    return time.monotonic() - began


def db_restart(pair: Pair, load: Load, down_s: float) -> dict[str, Any]:
    """Restart the database cluster under load; poll the active's API meanwhile."""
    active = active_of(pair)
    codes: list[tuple[int, bool]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.2):
            try:
                r = active.call("GET", "/v1/jobs", params={"limit": 1})
                codes.append((r.status_code, bool(r.headers.get("retry-after"))))
            except httpx.HTTPError:
                codes.append((0, False))

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    time.sleep(1.0)
    done = len(load.ids)
    began = time.monotonic()
    ctl = ["pg_ctlcluster", "--skip-systemctl-redirect", PG_VERSION, "main"]
    try:
        if down_s > 0:
            subprocess.run([*ctl, "stop"], check=True, timeout=120)
            time.sleep(down_s)
            subprocess.run([*ctl, "start"], check=True, timeout=120)
        else:
            subprocess.run([*ctl, "restart"], check=True, timeout=120)
    finally:
        subprocess.run([*ctl, "start"], timeout=120, capture_output=True)  # restored whatever
    restarted_s = time.monotonic() - began
    wait_for(lambda: len(load.ids) > done + 2, why="submits after the restart")
    stop.set()
    poller.join()
    refused = [c for c, _ in codes if c != 200]
    return {
        "restart_s": round(restarted_s, 2),
        "submits_again_after_s": round(time.monotonic() - began, 2),
        "polls": len(codes),
        "polls_503": sum(1 for c in refused if c == 503),
        "polls_503_with_retry_after": sum(1 for c, ra in codes if c == 503 and ra),
        "polls_500": sum(1 for c in refused if c >= 500 and c != 503),
        "polls_unreachable": sum(1 for c in refused if c == 0),
    }


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"p50_s": round(statistics.median(values), 2), "max_s": round(max(values), 2)}


def outcome(pair: Pair, ids: list[str]) -> dict[str, int]:
    pair.all_done(ids)
    states = pair.states(ids)
    markers: dict[str, list[int]] = {}
    for path in pair.markers.iterdir():
        _, job, attempt = path.name.split("-")
        markers.setdefault(job, []).append(int(attempt))
    lost = [j for j in ids if states.get(j) != "completed" or j not in markers]
    twice = [j for j, attempts in markers.items() if len(attempts) > 1 or max(attempts) > 0]
    with pair.engine.connect() as conn:  # a submit whose answer was lost may be stored
        stored = conn.execute(text("SELECT count(*) FROM jobs")).scalar_one()
    return {"jobs": len(ids), "lost": len(lost), "twice": len(twice),
            "stored_unanswered": int(stored) - len(ids)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each fault")
    parser.add_argument("--no-db-restart", action="store_true", help="leave PostgreSQL be")
    parser.add_argument("--db-down-s", type=float, default=0.0,
                        help="stop the database this long instead of a restart")  # fmt: skip
    args = parser.parse_args()
    result: dict[str, Any] = {"rounds": args.rounds}
    with tempfile.TemporaryDirectory() as tmp, fresh_database() as url:
        pair = Pair(Path(tmp), url)
        try:
            pair.start(pair.servers[0])
            wait_for(lambda: pair.active() is pair.servers[0], why="the first server active")
            pair.start(pair.servers[1])
            load = Load(pair)
            load.thread.start()
            time.sleep(2.0)
            takeovers: dict[str, list[float]] = {"kill -9": [], "SIGSTOP": [], "killed session": []}
            for _ in range(args.rounds):
                takeovers["kill -9"].append(kill9(pair))
                time.sleep(2.0)
                takeovers["SIGSTOP"].append(sigstop(pair))
                time.sleep(2.0)
                takeovers["killed session"].append(killed_sessions(pair, load))
                time.sleep(2.0)
            if not args.no_db_restart:
                result["db_restart"] = db_restart(pair, load, args.db_down_s)
            time.sleep(2.0)
            load.stop.set()
            load.thread.join()
            result["takeover"] = {k: _stats(v) for k, v in takeovers.items()}
            result["takeover_all_s"] = takeovers
            result["jobs"] = outcome(pair, load.ids)
            result["client"] = {
                "submits": len(load.latency_s),
                "errors": len(load.errors),
                "first_errors": load.errors[:3],
                **{f"latency_{k}": v for k, v in _stats(load.latency_s).items()},
            }
            result["epochs"] = pair.lease()[0]
        finally:
            pair.stop()
    print(f"{'fault':<16} {'takeover p50':>13} {'max':>7}  rounds")
    for fault, stats in result["takeover"].items():
        print(f"{fault:<16} {stats['p50_s']:>12.2f}s {stats['max_s']:>6.2f}s  {args.rounds}")
    jobs = result["jobs"]
    print(f"jobs {jobs['jobs']}: lost {jobs['lost']}, run twice {jobs['twice']}, stored though "
          f"the submit failed {jobs['stored_unanswered']}; epochs {result['epochs']}")  # fmt: skip
    client = result["client"]
    p50_s, max_s = client.get("latency_p50_s"), client.get("latency_max_s")
    print(f"client (both URLs): {client['submits']} submits, {client['errors']} errors, "
          f"latency p50 {p50_s} s, max {max_s} s")  # fmt: skip
    if "db_restart" in result:
        print(f"database restart: {result['db_restart']}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
