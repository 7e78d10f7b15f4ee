"""What telling the truth costs: one ``GET /healthz`` and one sweep of the loop for stranded
rows (``control.stuck.overdue``), with 10,000 jobs in the store.

The store is the one of ``bench_metrics.py`` (256 nodes, 10,000 jobs: 1,500 pending, 500
running, the rest finished) with ``--stuck`` of the running jobs turned into cancels an hour
old (stranded: /healthz names them). /healthz goes through the app's real route (TestClient):
the store's ``SELECT 1``, the loop's own figures, the count of stuck rows by state and the
oldest 20 ids. On SQLite and PostgreSQL (``--stores``; PostgreSQL as in the tests).

Run: ``python benchmarks/bench_healthz.py [--jobs 10000] [--stuck 50] [--repeat 30]
[--stores sqlite,postgresql]``; prints a table and writes
``benchmarks/results/bench_healthz.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import update

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_metrics import open_store, seed
from benchmarks.common import time_runs

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.stuck import Deadlines, overdue
from railyard.control.store.tables import JobRow
from railyard.control.usecases.loopstatus import LoopHealth

RESULTS = Path(__file__).parent / "results" / "bench_healthz.json"


def strand(store: Store, count: int) -> None:
    """``count`` running jobs become cancels an hour old whose end never came."""
    ids = [str(i + 1) for i in range(count)]
    with store.session() as s:
        s.execute(
            update(JobRow)
            .where(JobRow.id.in_(ids))
            .values(state="cancelling", updated_t_s=time.time() - 3600)
        )


def measure(kind: str, tmp: Path, jobs: int, stuck: int, repeat: int) -> dict[str, object]:
    with open_store(kind, tmp) as store:
        seed(store, jobs)
        strand(store, stuck)
        health = LoopHealth()
        health.ok(time.time())
        app = create_app(store, wake=lambda: None, state_dir=tmp, loop_health=health)
        client = TestClient(app)
        body = client.get("/healthz").json()
        assert body["stuck_jobs"] == stuck, body
        took = time_runs(lambda: client.get("/healthz"), repeat)

        def sweep() -> None:
            with store.session() as s:
                assert len(overdue(s, time.time(), Deadlines())) == stuck

        swept = time_runs(sweep, repeat)
    return {
        "store": kind,
        "jobs": jobs,
        "stuck": stuck,
        "healthz_p50_ms": statistics.median(took) * 1e3,
        "healthz_max_ms": max(took) * 1e3,
        "sweep_p50_ms": statistics.median(swept) * 1e3,
        "sweep_max_ms": max(swept) * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--stuck", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--stores", default="sqlite,postgresql")
    args = parser.parse_args()
    rows = []
    for kind in args.stores.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(measure(kind, Path(tmp), args.jobs, args.stuck, args.repeat))
    head = f"{'store':12} {'jobs':>7} {'stuck':>6} {'healthz p50 ms':>15} {'max ms':>8}"
    print(f"{head} {'sweep p50 ms':>13} {'max ms':>8}")
    for r in rows:
        line = f"{r['store']:12} {r['jobs']:>7} {r['stuck']:>6} {r['healthz_p50_ms']:>15.2f}"
        print(f"{line} {r['healthz_max_ms']:>8.2f} {r['sweep_p50_ms']:>13.2f} "
              f"{r['sweep_max_ms']:>8.2f}")  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "healthz", "rows": rows}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
