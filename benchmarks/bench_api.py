"""Control-plane throughput and latency against a real `railyard up` on loopback.

- submissions per second through the REST API (target >= 500/s), one keep-alive client and
  4 and 8 concurrent ones, with each request's latency (p50, p99) under 8 clients, on SQLite
  and on PostgreSQL (``--stores``; PostgreSQL as in the tests, ``RAILYARD_TEST_PG``);
- submit-to-start latency of a trivial job (target < 1 s): from just before the POST to the
  job's recorded start time (same machine clock), median and p90 over N jobs run one by one.

Run: ``python benchmarks/bench_api.py [--jobs 2000] [--latency-jobs 20]
[--stores sqlite,postgresql]``; prints a table and writes ``benchmarks/results/bench_api.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import batch_rate, p99, submit_rate
from tests.control.conftest import fresh_pg_database
from tests.integration.server_proc import ServerProcess

RESULTS = Path(__file__).parent / "results" / "bench_api.json"
API_SINGLE = {"command": ["true"], "gpus": 1, "queue": "default", "priority": "low"}


def drained_server(state_dir: Path, database_url: str | None) -> ServerProcess:
    """A server whose one node is drained: submissions queue up and the scheduler cycles over
    them, but no thousands of processes compete with the API for this machine's cores."""
    server = ServerProcess(state_dir, gpus=8, database_url=database_url)
    server.state_dir.mkdir()
    server.start()
    (node,) = server.request("GET", "/v1/nodes")
    server.request("POST", f"/v1/nodes/{node['name']}/drain", json={"reason": "bench"})
    return server


def store_rows(store: str, tmp: Path, jobs: int) -> list[dict[str, object]]:
    """Submission figures on one store."""
    with contextlib.ExitStack() as stack:
        url = None if store == "sqlite" else stack.enter_context(fresh_pg_database())
        server = drained_server(tmp / f"rate-{store}", url)
        try:
            one, _ = submit_rate(server.url, server.token, jobs, 1, API_SINGLE)
            four, _ = submit_rate(server.url, server.token, jobs, 4, API_SINGLE)
            eight, took = submit_rate(server.url, server.token, jobs, 8, API_SINGLE)
            bulk = batch_rate(server.url, server.token, jobs * 5, per_request=500)
        finally:
            server.stop()
    return [
        {"figure": f"{store}: submissions/s, 1 client", "value": one, "target": ">= 500"},
        {"figure": f"{store}: submissions/s, 4 clients", "value": four, "target": ">= 500"},
        {"figure": f"{store}: submissions/s, 8 clients", "value": eight, "target": ">= 500"},
        {"figure": f"{store}: p50 submit s, 8 clients", "value": statistics.median(took),
         "target": ""},
        {"figure": f"{store}: p99 submit s, 8 clients", "value": p99(took), "target": ""},
        {"figure": f"{store}: jobs/s, batch of 500", "value": bulk, "target": ">= 500"},
    ]  # fmt: skip


def start_latency(server: ServerProcess, count: int) -> list[float]:
    headers = {"Authorization": f"Bearer {server.token}"}
    out = []
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        for _ in range(count):
            before = time.time()
            (job,) = client.post("/v1/jobs", json={"command": ["true"], "gpus": 1}).json()
            while True:
                row = client.get(f"/v1/jobs/{job['id']}").json()
                if row["start_t_s"] is not None:
                    out.append(row["start_t_s"] - before)
                    break
                time.sleep(0.01)
            while client.get(f"/v1/jobs/{job['id']}").json()["state"] != "completed":
                time.sleep(0.02)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--latency-jobs", type=int, default=20)
    parser.add_argument("--stores", default="sqlite,postgresql")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        # Latency first, on an idle server; then a fresh server for throughput, so the
        # queue of submitted-but-unstarted jobs does not slow the latency runs.
        server = ServerProcess(Path(tmp) / "latency", gpus=8)
        server.state_dir.mkdir()
        server.start()
        try:
            latency = start_latency(server, args.latency_jobs)
        finally:
            server.stop()
        for store in args.stores.split(","):
            rows += store_rows(store, Path(tmp), args.jobs)
    rows.append(
        {"figure": "submit-to-start median s", "value": statistics.median(latency), "target": "< 1"}
    )
    rows.append(
        {
            "figure": "submit-to-start p90 s",
            "value": statistics.quantiles(latency, n=10)[-1],
            "target": "",
        }
    )
    print(f"{'figure':42} {'value':>10} {'target':>8}")
    for row in rows:
        print(f"{row['figure']:42} {row['value']:>10.3f} {row['target']:>8}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "api", "rows": rows}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
