"""One user's 10,000-task array as the other users meet it, with jobs really running (issue 52,
item 5): the bench in ``bench_store_load.py`` drains its node, so no process competes with the
API; here every task starts, on a root ``railyard up`` (multi-user mode) with 8 GPUs.

bob submits ``--array=0-9999`` of ``true`` through ``railyard submit`` (a new process, as a user
runs it), lets it run, then cancels it with ``railyard cancel``. Meanwhile:

- 4 of alice's clients submit single 1-GPU jobs back to back, held (only the submit is
  measured; held, they do not queue ahead of her probes): errors and p99 latency;
- a bystander polls ``/healthz`` every 100 ms: p50, p99, answers that were not 200, and the
  longest run of them;
- every 2 s alice submits one more 1-GPU job: the seconds from her submit to its start as the
  store recorded it (target < 2 s: a fair-share cluster starts her before bob's next task);
- after the cancel: jobs still STARTING or CANCELLING 20 s later (target 0);
- bob's tasks that ran: the run time the store recorded, start to end, for a process that
  takes milliseconds (p50 and max).

Run as root: ``python benchmarks/bench_array_live.py [--tasks 10000] [--run-s 20]``; prints a
table and writes ``benchmarks/results/bench_array_live.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import p99
from tests.integration.tenants import Site, shared_site

RESULTS = Path(__file__).parent / "results" / "bench_array_live.json"
CLIENTS = 4


class Watch:
    """The bystanders: healthz polling, alice's single submits, alice's probe jobs."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.stop = threading.Event()
        self.healthz_s: list[float] = []
        self.healthz_bad: list[float] = []  # monotonic times of answers that were not 200
        self.submit_s: list[float] = []
        self.submit_errors: list[int] = []
        self.probes: list[str] = []
        self.threads = [threading.Thread(target=self._healthz, daemon=True)]
        self.threads += [
            threading.Thread(target=self._singles, daemon=True) for _ in range(CLIENTS)
        ]
        self.threads.append(threading.Thread(target=self._probes, daemon=True))

    def _client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.site.alice.token}"}
        return httpx.Client(base_url=self.site.server.url, headers=headers, timeout=60)

    def _healthz(self) -> None:
        with self._client() as client:
            while not self.stop.is_set():
                began = time.perf_counter()
                try:
                    ok = client.get("/healthz").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.healthz_s.append(time.perf_counter() - began)
                if not ok:
                    self.healthz_bad.append(time.monotonic())
                self.stop.wait(0.1)

    def _post(self, client: httpx.Client, *, hold: bool = False) -> httpx.Response:
        body = {"command": ["true"], "gpus": 1, "env": {"PATH": "/usr/bin:/bin"}, "hold": hold}
        return client.post("/v1/jobs", json=body)

    def _singles(self) -> None:
        with self._client() as client:
            while not self.stop.is_set():
                began = time.perf_counter()
                try:
                    status = self._post(client, hold=True).status_code  # only the submit counts
                except httpx.HTTPError:
                    status = 0
                self.submit_s.append(time.perf_counter() - began)
                if status != 201:
                    self.submit_errors.append(status)
                self.stop.wait(0.05)

    def _probes(self) -> None:
        with self._client() as client:
            while not self.stop.wait(2.0):
                answer = self._post(client)
                if answer.status_code == 201:
                    self.probes.append(answer.json()[0]["id"])

    def __enter__(self) -> Watch:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def longest_bad_s(self) -> float:
        """The longest stretch of consecutive non-200 answers (0.1 s apart, give or take)."""
        longest, start, last = 0.0, None, None
        for t in self.healthz_bad:
            if last is None or t - last > 1.0:
                start = t
            last = t
            longest = max(longest, t - (start or t) + 0.1)
        return longest


def railyard(site: Site, *args: str) -> tuple[float, str]:
    """One CLI process as bob (his token; the admin's URL): wall seconds and its stdout."""
    env = {**os.environ, "RAILYARD_URL": site.server.url, "RAILYARD_TOKEN": site.bob.token}
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "railyard", *args], env=env, text=True,
                          capture_output=True, check=True, timeout=600)  # fmt: skip
    return time.perf_counter() - began, done.stdout.strip()


def start_delays_s(site: Site, ids: list[str]) -> list[float]:
    out = []
    for job_id in ids:
        record: dict[str, Any] = site.server.request("GET", f"/v1/jobs/{job_id}")
        if record.get("start_t_s") is not None:
            out.append(record["start_t_s"] - record["submit_t_s"])
        else:
            out.append(float("inf"))  # never started while the array ran
    return out


def measure(tasks: int, run_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        state.mkdir()
        with shared_site(state, gpus=8) as site, Watch(site) as watch:
            time.sleep(2.0)  # the bystanders' quiet baseline
            submit_s, array_id = railyard(site, "submit", "--parsable", "-G", "1",
                                          f"--array=0-{tasks - 1}", "--", "true")  # fmt: skip
            time.sleep(run_s)
            cancel_s, _ = railyard(site, "cancel", array_id)
            time.sleep(20.0)
            stuck = site.server.request(
                "GET",
                "/v1/jobs",
                params=[("state", "starting"), ("state", "cancelling"), ("limit", "1000")],
            )
            ran = site.server.request(
                "GET", "/v1/jobs",
                params={"array": array_id, "state": "completed", "limit": 1000},
            )  # fmt: skip
            delays = start_delays_s(site, watch.probes)
        run_times = [j["end_t_s"] - j["start_t_s"] for j in ran if j.get("start_t_s")]
    return {
        "tasks": tasks,
        "array_submit_s": round(submit_s, 3),
        "array_cancel_s": round(cancel_s, 3),
        "singles": len(watch.submit_s),
        "single_submit_p99_s": round(p99(watch.submit_s), 3),
        "single_submit_errors": len(watch.submit_errors),
        "healthz_p50_ms": round(statistics.median(watch.healthz_s) * 1000, 1),
        "healthz_p99_ms": round(p99(watch.healthz_s) * 1000, 1),
        "healthz_not_200": len(watch.healthz_bad),
        "healthz_longest_not_200_s": round(watch.longest_bad_s(), 1),
        "alice_start_p50_s": round(statistics.median(delays), 2) if delays else None,
        "alice_start_max_s": round(max(delays), 2) if delays else None,
        "stuck_20s_after_cancel": len(stuck),
        "task_run_p50_s": round(statistics.median(run_times), 3) if run_times else None,
        "task_run_max_s": round(max(run_times), 3) if run_times else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--run-s", type=float, default=20.0, help="seconds before the cancel")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_array_live: run as root (it creates two Unix users)")
    row = measure(args.tasks, args.run_s)
    width = max(map(len, row))
    for key, value in row.items():
        print(f"{key:<{width}}  {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(row, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
