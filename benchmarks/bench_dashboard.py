"""Dashboard pages with 10,000 jobs in the store and 100,000 more that ended in the last 15
minutes (``--recent``, issue 60's churn; the target: under 100 ms server time each), and
100,000 finished attempts over 30 days behind the accounting pages (``--attempts``).

The cluster of bench_metrics.py: 256 nodes of 8 GPUs, 7 queues, 10,000 jobs (500 running,
``--pending`` waiting: 1,500, and 9,500 as in the live loop's world; the rest finished).
Each page is fetched through the app (FastAPI's test client, no network), logged in as the
admin, who sees everything; the median and the worst of
`--repeat` loads after a warm-up, on SQLite and PostgreSQL. The what-if runs the simulator on
the live state: it is an action, timed apart. Prints a table and writes
benchmarks/results/bench_dashboard.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_metrics import FLAVOR, QUEUES, open_store, seed
from benchmarks.common import time_runs
from sqlalchemy import insert, select

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, SampleRow, User
from railyard.control.store.usagedays import Ended, record_attempts
from railyard.web.routes import router

RESULTS = Path(__file__).parent / "results" / "bench_dashboard.json"
PAGES = {
    "overview": "/ui/",
    "overview, 7 days": "/ui/?range=7d",
    "jobs (newest 50)": "/ui/jobs",
    "jobs, pending in team3": "/ui/jobs?state=pending&queue=team3",
    "jobs, by priority": "/ui/jobs?sort=priority",
    "jobs, search a name": "/ui/jobs?q=nomatch",
    "jobs, page 100": "/ui/jobs?offset=4950",
    "jobs, 500 a page": "/ui/jobs?rows=500",
    "job page": "/ui/jobs/1",
    "fabric map (256 nodes)": "/ui/fabric",
    "fabric, one job picked": "/ui/fabric?job=1",
    "queues": "/ui/queues",
    "alerts": "/ui/alerts",
    "node page, 24 hours": "/ui/nodes/n0001?range=24h",
    "GET /v1/jobs (first page)": "/v1/jobs",
    "accounting, 7 days by user": "/ui/accounting?days=7&by=user",
    "accounting, 30 days by queue": "/ui/accounting?days=30&by=queue",
    "accounting, 365 days by account": "/ui/accounting?days=365&by=account",
}
USERS = 40  # the accounting history's users


def seed_attempts(store: Store, count: int) -> None:
    """``count`` finished attempts over the last 30 days (1 to 64 GPUs, minutes to a day),
    as the loop writes them: what the accounting pages sum."""
    now = time.time()
    rng = random.Random(7)
    rows = []
    for i in range(count):
        start = now - rng.uniform(0, 30 * 86400)
        end = min(now, start + rng.uniform(60, 86400))
        rows.append(Ended(f"h{i}", 0, f"user{i % USERS}", QUEUES[i % len(QUEUES)],
                          rng.choice((1, 2, 4, 8, 64)), start, end, "completed"))  # fmt: skip
    with store.session() as s:
        record_attempts(s, rows)


def seed_recent(store: Store, count: int, first_number: int) -> None:
    """``count`` jobs that ended in the last 15 minutes (a busy cluster's churn of short
    jobs, as issue 60 measured: 100,000), in one executemany."""
    now = time.time()
    rng = random.Random(11)
    with store.session() as s:
        admin = s.scalars(select(User).where(User.name == "admin")).one()
        rows = []
        for i in range(count):
            number = first_number + i
            end = now - rng.uniform(0, 900)
            start = end - rng.uniform(1, 300)
            rows.append({"id": str(number), "number": number, "user_id": admin.id,
                         "queue": QUEUES[i % len(QUEUES)], "state": "completed",
                         "reason": "Completed", "command": ["true"], "flavor": FLAVOR,
                         "workers": 1, "gpus_per_worker": 1 + i % 2, "submit_t_s": start - 5,
                         "start_t_s": start, "end_t_s": end, "updated_t_s": end,
                         "name": f"short{i % 97}"})  # fmt: skip
        s.execute(insert(JobRow), rows)


def seed_samples(store: Store, nodes: int = 4, interval_s: float = 30.0) -> None:
    """A day of the sampler's GPU readings (every ``interval_s``, 8 GPUs) on ``nodes`` nodes:
    what a node's page reads (one node's, through its index)."""
    now = time.time()
    ticks = int(86400 / interval_s)
    with store.session() as s:
        for n in range(nodes):
            rows = [{"job_id": str(n + 1), "attempt": 0, "t_s": now - 86400 + i * interval_s,
                     "node": f"n{n:04}", "gpu": g, "gpu_util_pct": float((i + g) % 100)}
                    for i in range(ticks) for g in range(8)]  # fmt: skip
            s.execute(insert(SampleRow), rows)


def measure(
    kind: str,
    tmp: Path,
    jobs: int,
    repeat: int,
    pending: int,
    attempts: int,
    recent: int = 0,
    only: frozenset[str] = frozenset(),
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with open_store(kind, tmp) as store:
        token = seed(store, jobs, pending)
        seed_attempts(store, attempts)
        if recent:
            seed_recent(store, recent, jobs + 1)
        seed_samples(store)
        app = create_app(store, wake=lambda: None, state_dir=tmp, extra_routers=[router()])
        client = TestClient(app)
        form = client.get("/ui/login").text  # the login form's CSRF value, as a browser
        csrf = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        client.post("/ui/login", data={"token": token, "csrf": csrf}).raise_for_status()
        client.headers["Authorization"] = f"Bearer {token}"  # the API's pages (/v1/jobs)
        for label, path in PAGES.items():
            if only and label not in only:
                continue
            size = len(client.get(path).content)
            took = time_runs(lambda path=path: client.get(path).raise_for_status(), repeat)
            rows.append({"store": kind, "pending": pending, "recent": recent, "page": label,
                         "p50_ms": statistics.median(took) * 1e3, "max_ms": max(took) * 1e3,
                         "bytes": size})  # fmt: skip
        if only:
            return rows
        took = time_runs(lambda: client.get("/ui/queues/whatif").raise_for_status(), 2)
        rows.append({"store": kind, "pending": pending, "recent": recent,
                     "page": "what-if (simulator, action)",
                     "p50_ms": statistics.median(took) * 1e3, "max_ms": max(took) * 1e3,
                     "bytes": 0})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--pending", default="1500,9500", help="pending jobs of the --jobs")
    parser.add_argument("--attempts", type=int, default=100_000, help="finished, for accounting")
    parser.add_argument(
        "--recent",
        type=int,
        default=100_000,
        help="more jobs, ended in the last 15 minutes (issue 60's 100,000)",
    )
    parser.add_argument("--pages", default="", help="only these pages (comma-separated labels)")
    args = parser.parse_args()
    rows = []
    for kind in args.stores.split(","):
        for pending in map(int, args.pending.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                rows += measure(
                    kind,
                    Path(tmp),
                    args.jobs,
                    args.repeat,
                    pending,
                    args.attempts,
                    args.recent,
                    frozenset(filter(None, args.pages.split(","))),
                )
    print(f"{'store':<11}{'pending':>8} {'page':<30}{'p50 ms':>9}{'max ms':>9}{'KiB':>7}")
    for r in rows:
        print(f"{r['store']:<11}{r['pending']:>8} {r['page']:<30}{r['p50_ms']:>9.1f}"
              f"{r['max_ms']:>9.1f}{int(r['bytes']) / 1024:>7.0f}")  # type: ignore[call-overload]  # fmt: skip
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"jobs": args.jobs, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
