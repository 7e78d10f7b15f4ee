"""Dashboard pages with 10,000 jobs in the store (the target: under 100 ms server time each).

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
import statistics
import sys
import tempfile
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_metrics import open_store, seed
from benchmarks.common import time_runs

from railyard.control.api.app import create_app
from railyard.web.routes import router

RESULTS = Path(__file__).parent / "results" / "bench_dashboard.json"
PAGES = {
    "overview": "/ui/",
    "jobs (newest 50)": "/ui/jobs",
    "jobs, pending in team3": "/ui/jobs?state=pending&queue=team3",
    "job page": "/ui/jobs/1",
    "fabric map (256 nodes)": "/ui/fabric",
    "fabric, one job picked": "/ui/fabric?job=1",
    "queues": "/ui/queues",
}


def measure(kind: str, tmp: Path, jobs: int, repeat: int, pending: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with open_store(kind, tmp) as store:
        token = seed(store, jobs, pending)
        app = create_app(store, wake=lambda: None, state_dir=tmp, extra_routers=[router()])
        client = TestClient(app)
        form = client.get("/ui/login").text  # the login form's CSRF value, as a browser
        csrf = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        client.post("/ui/login", data={"token": token, "csrf": csrf}).raise_for_status()
        for label, path in PAGES.items():
            size = len(client.get(path).content)
            took = time_runs(lambda path=path: client.get(path).raise_for_status(), repeat)
            rows.append({"store": kind, "pending": pending, "page": label,
                         "p50_ms": statistics.median(took) * 1e3, "max_ms": max(took) * 1e3,
                         "bytes": size})  # fmt: skip
        took = time_runs(lambda: client.get("/ui/queues/whatif").raise_for_status(), 2)
        rows.append({"store": kind, "pending": pending, "page": "what-if (simulator, action)",
                     "p50_ms": statistics.median(took) * 1e3, "max_ms": max(took) * 1e3,
                     "bytes": 0})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--pending", default="1500,9500", help="pending jobs of the --jobs")
    args = parser.parse_args()
    rows = []
    for kind in args.stores.split(","):
        for pending in map(int, args.pending.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                rows += measure(kind, Path(tmp), args.jobs, args.repeat, pending)
    print(f"{'store':<11}{'pending':>8} {'page':<30}{'p50 ms':>9}{'max ms':>9}{'KiB':>7}")
    for r in rows:
        print(f"{r['store']:<11}{r['pending']:>8} {r['page']:<30}{r['p50_ms']:>9.1f}"
              f"{r['max_ms']:>9.1f}{int(r['bytes']) / 1024:>7.0f}")  # type: ignore[call-overload]  # fmt: skip
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"jobs": args.jobs, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
