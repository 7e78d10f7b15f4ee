"""How long one ``GET /metrics`` takes with 10,000 jobs in the store.

The store holds 256 eight-GPU nodes, 8 queues, 10,000 jobs (``--pending`` of them waiting
with a reason: 1,500, and 9,500 for the live loop's world of 10,000 jobs in the queue; 500
running with placements, the rest finished) and fair-share usage; the scrape goes
through the app's real route (TestClient: routing, the admin token's lookup, every
aggregate query, the text encoding), with made-up readings of 8 GPUs on the first node so the
per-GPU (DCGM) path and its placement lookup run too. On SQLite and PostgreSQL
(``--stores``; PostgreSQL as in the tests, ``RAILYARD_TEST_PG``).

Run: ``python benchmarks/bench_metrics.py [--jobs 10000] [--repeat 30]
[--stores sqlite,postgresql]``; prints a table and writes
``benchmarks/results/bench_metrics.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import time_runs
from tests.control.conftest import fresh_pg_database

from railyard.control.api.app import create_app
from railyard.control.metrics.loopstats import LoopMetrics
from railyard.control.metrics.prometheus import MetricsConfig
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.tables import JobRow, NodeRow, QueueRow, UsageRow, User
from railyard.control.usecases.auth import issue_token
from railyard.probe import GpuReading

RESULTS = Path(__file__).parent / "results" / "bench_metrics.json"
FLAVOR = "H100-SXM-80GB"
NODES, GPUS = 256, 8
QUEUES = [f"team{i}" for i in range(7)]
REASONS = ["Resources", "Priority", "QOSGrpGRES", "Dependency", "JobHeldUser"]
FINISHED = ["completed", "failed", "cancelled", "timeout"]


def seed(store: Store, jobs: int, pending: int = 1500) -> str:
    """The cluster above (``pending`` of the jobs waiting); returns an admin token."""
    now = time.time()
    with store.session() as s:
        admin = User(name="admin", is_admin=True, created_t_s=now)
        s.add(admin)
        s.add(QueueRow(name="root", nominal_gpus={FLAVOR: 0}, created_t_s=now))
        s.flush()
        for name in QUEUES:
            nominal = {FLAVOR: NODES * GPUS // len(QUEUES)}
            s.add(QueueRow(name=name, parent="root", nominal_gpus=nominal, created_t_s=now))
        for n in range(NODES):
            s.add(NodeRow(name=f"n{n:04}", flavor=FLAVOR, gpus=GPUS, path=["su0", f"lg{n // 32}"],
                          state="ready" if n % 50 else "drained", updated_t_s=now))  # fmt: skip
        s.flush()
        rows = []
        for i in range(jobs):
            queue = QUEUES[i % len(QUEUES)]
            if i < 500:  # running: one whole node each (500 > 256 nodes: two per node, 4 GPUs)
                state, node = "running", f"n{i % NODES:04}"
                gpus = list(range(4)) if i < NODES else list(range(4, 8))
                placement: dict[str, list[int]] | None = {node: gpus}
                reason, workers, per = "Fits", 1, 4
            elif i < 500 + pending:
                state, placement, reason, workers, per = "pending", None, REASONS[i % 5], 2, 8
            else:
                state, placement, reason, workers, per = FINISHED[i % 4], None, "Completed", 1, 1
            start, end = (now - 60 if state == "running" else None), None
            if state in FINISHED:  # ended over the last 30 days, as a busy cluster's history
                end = now - (i * 7919 % 2_592_000)
                start = end - 60 - i % 3600
            rows.append(
                JobRow(id=str(i + 1), number=i + 1, user_id=admin.id, queue=queue, state=state,
                       reason=reason, command=["true"], flavor=FLAVOR, workers=workers,
                       gpus_per_worker=per, placement=placement,
                       submit_t_s=min(now - 3600, start or now), start_t_s=start, end_t_s=end,
                       updated_t_s=now)
            )  # fmt: skip
        s.add_all(rows)
        for name in ["root", *QUEUES]:
            s.add(UsageRow(key=f"queue:{name}", gpu_s=1e6, updated_t_s=now))
            s.add(UsageRow(key=f"user:{name}/admin", gpu_s=1e6, updated_t_s=now))
        _, token = issue_token(s, admin, "bench", now)
    return token


def readings() -> list[GpuReading]:
    return [
        GpuReading(index=i, uuid=f"GPU-{i:08}", name="NVIDIA H100 80GB HBM3", minor=i,
                   util_pct=90.0, fb_used_mib=60000.0, fb_free_mib=20000.0, power_w=600.0,
                   temp_c=60.0, sm_clock_mhz=1980.0, mem_clock_mhz=2619.0)
        for i in range(GPUS)
    ]  # fmt: skip


@contextlib.contextmanager
def open_store(kind: str, tmp: Path) -> Iterator[Store]:
    if kind == "sqlite":
        store = Store(sqlite_url(tmp / "railyard.db"))
        yield store
        store.close()
        return
    with fresh_pg_database() as url:
        store = Store(url)
        yield store
        store.close()


def measure(kind: str, tmp: Path, jobs: int, repeat: int, pending: int) -> dict[str, object]:
    with open_store(kind, tmp) as store:
        token = seed(store, jobs, pending)
        loop = LoopMetrics()
        for i in range(1000):  # histograms with something in them
            loop.observe(0.01 * (i % 7), 0.02 * (i % 5), [float(i)])
        config = MetricsConfig(loop=loop, read_gpus=readings, node_name="n0000")
        app = create_app(store, wake=lambda: None, state_dir=tmp, metrics=config)
        client = TestClient(app, headers={"Authorization": f"Bearer {token}"})
        size = len(client.get("/metrics").content)
        took = time_runs(lambda: client.get("/metrics").raise_for_status(), repeat)
    return {
        "store": kind,
        "jobs": jobs,
        "pending": pending,
        "p50_ms": statistics.median(took) * 1e3,
        "max_ms": max(took) * 1e3,
        "bytes": size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--pending", default="1500,9500", help="pending jobs of the --jobs")
    args = parser.parse_args()
    rows = []
    for kind in args.stores.split(","):
        for pending in map(int, args.pending.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(measure(kind, Path(tmp), args.jobs, args.repeat, pending))
    print(f"{'store':12} {'jobs':>7} {'pending':>8} {'p50 ms':>8} {'max ms':>8} {'bytes':>8}")
    for r in rows:
        line = f"{r['store']:12} {r['jobs']:>7} {r['pending']:>8} {r['p50_ms']:>8.1f}"
        print(f"{line} {r['max_ms']:>8.1f} {r['bytes']:>8}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "metrics", "rows": rows}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
