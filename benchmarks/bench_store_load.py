"""One user's big array against everyone else's small submissions, on a real `railyard up`.

Figures, on SQLite and on PostgreSQL (``--stores``; PostgreSQL as in the tests):

- a 10,000-task array (``--array=0-9999%2``): the submit's and the cancel's wall time, one
  request each (target < 0.5 s); the same through ``railyard submit`` / ``cancel`` as new
  processes (Python's start-up included);
- 8 keep-alive clients submitting single jobs: jobs/s, p50 and p99 latency (targets: >= 1,000/s
  on SQLite, >= 500/s on PostgreSQL);
- the same 8 clients while the array is submitted and cancelled: errors (any non-201) and p99
  (targets: 0 errors, p99 < 250 ms);
- ``POST /v1/jobs/batch`` of 1,000 jobs: jobs/s (target >= 10,000/s).

The server's one node is drained, so submissions queue up and the loop cycles over them but no
processes compete with the API for this machine's cores.

Run: ``python benchmarks/bench_store_load.py [--array 10000] [--singles 4000]
[--stores sqlite,postgresql]``; prints a table and writes
``benchmarks/results/bench_store_load.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import SINGLE, api_client, batch_rate, p99, submit_rate
from benchmarks.rawhttp import RawClient
from tests.control.conftest import fresh_pg_database
from tests.integration.server_proc import ServerProcess

RESULTS = Path(__file__).parent / "results" / "bench_store_load.json"
CLIENTS = 8


def _client(server: ServerProcess) -> httpx.Client:
    return api_client(server.url, server.token)


def cli_round(server: ServerProcess, tasks: int) -> tuple[float, float]:
    """``railyard submit --array=0-<tasks-1>%2 -- true`` and ``railyard cancel`` of it, each a
    new process as a user runs them: wall seconds of each (Python's start-up included)."""
    env = {**os.environ, "RAILYARD_URL": server.url, "RAILYARD_TOKEN": server.token}
    command = [sys.executable, "-m", "railyard"]
    began = time.perf_counter()
    out = subprocess.run(
        [*command, "submit", "--parsable", f"--array=0-{tasks - 1}%2", "--", "true"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    submit_s = time.perf_counter() - began
    began = time.perf_counter()
    subprocess.run([*command, "cancel", out.stdout.split()[0]], env=env, check=True,
                   capture_output=True)  # fmt: skip
    return submit_s, time.perf_counter() - began


def array_round(server: ServerProcess, tasks: int) -> tuple[float, float, int]:
    """Submit one ``tasks``-task array, then cancel it; both wall times and its task count."""
    with _client(server) as client:
        began = time.perf_counter()
        response = client.post("/v1/jobs", json={**SINGLE, "array": f"0-{tasks - 1}%2"})
        submit_s = time.perf_counter() - began
        response.raise_for_status()
        [array] = response.json()  # the array's record, as sbatch prints one id
        began = time.perf_counter()
        cancelled = client.delete(f"/v1/jobs/{array['id']}")
        cancel_s = time.perf_counter() - began
        cancelled.raise_for_status()
        tasks = client.get("/v1/jobs", params={"array": array["id"]}).json()
    return submit_s, cancel_s, len(tasks)


def array_under_load(server: ServerProcess, tasks: int) -> dict[str, float]:
    """8 clients submit single jobs before, during and after one array's submit and cancel."""
    stop = threading.Event()
    errors: list[str] = []
    latencies: list[float] = []
    lock = threading.Lock()

    def run() -> None:
        with RawClient(server.url, server.token, "/v1/jobs", SINGLE) as client:
            while not stop.is_set():
                began = time.perf_counter()
                try:
                    status, answer = client.post()
                    ok = status == 201
                    why = f"{status} {answer[:80]!r}"
                except OSError as exc:
                    ok, why = False, repr(exc)
                took = time.perf_counter() - began
                with lock:
                    latencies.append(took)
                    if not ok:
                        errors.append(why)

    threads = [threading.Thread(target=run) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    try:
        submit_s, cancel_s, _ = array_round(server, tasks)
        time.sleep(1.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    if errors:
        print(f"  first error: {errors[0]}")
    return {
        "submit_s": submit_s,
        "cancel_s": cancel_s,
        "errors": float(len(errors)),
        "requests": float(len(latencies)),
        "p99_s": p99(latencies),
        "max_s": max(latencies),
    }


def print_rows(rows: list[dict[str, object]]) -> None:
    for row in rows:
        print(f"{row['figure']:42} {row['value']:>10.3f} {row['target']:>9}", flush=True)


def drained_server(state_dir: Path, database_url: str | None) -> ServerProcess:
    """``bench_api.drained_server``, with time to start on a loaded machine."""
    server = ServerProcess(state_dir, gpus=8, database_url=database_url)
    server.state_dir.mkdir()
    server.start(timeout_s=300)
    (node,) = server.request("GET", "/v1/nodes")
    server.request("POST", f"/v1/nodes/{node['name']}/drain", json={"reason": "bench"})
    return server


def store_rows(store: str, tmp: Path, args: argparse.Namespace) -> list[dict[str, object]]:
    with contextlib.ExitStack() as stack:
        url = None if store == "sqlite" else stack.enter_context(fresh_pg_database())
        server = drained_server(tmp / f"load-{store}", url)
        try:
            submit_s, cancel_s, rows = array_round(server, args.array)
            assert rows == args.array, rows
            cli_submit_s, cli_cancel_s = cli_round(server, args.array)
            rate, took = submit_rate(server.url, server.token, args.singles, CLIENTS)
            loaded = array_under_load(server, args.array)
            bulk = batch_rate(server.url, server.token, args.batch_jobs)
        finally:
            server.stop()
    single_target = ">= 1000" if store == "sqlite" else ">= 500"
    n = f"{args.array // 1000}k"
    return [
        {"figure": f"{store}: {n}-task array submit s", "value": submit_s, "target": "< 0.5"},
        {"figure": f"{store}: {n}-task array cancel s", "value": cancel_s, "target": "< 0.5"},
        {"figure": f"{store}: CLI array submit s (process)", "value": cli_submit_s,
         "target": ""},
        {"figure": f"{store}: CLI array cancel s (process)", "value": cli_cancel_s,
         "target": ""},
        {"figure": f"{store}: singles/s, 8 clients", "value": rate, "target": single_target},
        {"figure": f"{store}: p50 single s, 8 clients", "value": statistics.median(took),
         "target": ""},
        {"figure": f"{store}: p99 single s, 8 clients", "value": p99(took), "target": ""},
        {"figure": f"{store}: under array: submit s", "value": loaded["submit_s"],
         "target": "< 0.5"},
        {"figure": f"{store}: under array: cancel s", "value": loaded["cancel_s"],
         "target": "< 0.5"},
        {"figure": f"{store}: under array: requests", "value": loaded["requests"], "target": ""},
        {"figure": f"{store}: under array: errors", "value": loaded["errors"], "target": "0"},
        {"figure": f"{store}: under array: p99 single s", "value": loaded["p99_s"],
         "target": "< 0.25"},
        {"figure": f"{store}: under array: max single s", "value": loaded["max_s"],
         "target": ""},
        {"figure": f"{store}: batch of 1000, jobs/s", "value": bulk, "target": ">= 10000"},
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--array", type=int, default=10_000)
    parser.add_argument("--singles", type=int, default=4000)
    parser.add_argument("--batch-jobs", type=int, default=10_000)
    parser.add_argument("--stores", default="sqlite,postgresql")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for store in args.stores.split(","):
            rows += store_rows(store, Path(tmp), args)
            print_rows(rows[-14:])  # as it goes: a slow store takes minutes
    print(f"{'figure':42} {'value':>10} {'target':>9}")
    print_rows(rows)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "store_load", "rows": rows}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
