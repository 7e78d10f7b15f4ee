"""How fast the `railyard` command answers, against a real `railyard up` on loopback (SQLite).

- start time of `railyard --help` and of `railyard queue` (target < 0.3 s each);
- one `railyard submit -- true` end to end, a new process per job as users type it (target
  < 0.15 s), and what that is in submissions per second;
- single submissions per second through the REST API, one request per job: over one
  keep-alive connection, and with a new connection per job.

Beside each wall time, the CPU time of the ``railyard`` process itself: on this shared 2-core
machine the wall time follows everyone's load, the CPU time is what the command costs.

The server's node is drained first, so submitted jobs stay pending and no job processes compete
with the measurement for this machine's cores. Each figure is the median of ``--repeat`` runs
(after one warm-up). Run: ``python benchmarks/bench_cli.py [--repeat 20]``; prints a table and
writes ``benchmarks/results/bench_cli.json``. ``--src DIR`` runs another checkout's ``src``
(e.g. a baseline) for a before/after comparison.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.server_proc import ServerProcess

RESULTS = Path(__file__).parent / "results"


def timed_cli(args: list[str], env: dict[str, str], repeat: int) -> tuple[list[float], list[float]]:
    """Wall seconds of ``python -m railyard ARGS`` as a fresh process, ``repeat`` times, and the
    CPU seconds that process used (user + system: what the command costs whatever the load)."""
    cmd = [sys.executable, "-m", "railyard", *args]
    subprocess.run(cmd, env=env, check=True, capture_output=True)  # warm the page cache
    wall, cpu = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall, cpu


def api_submits(server: ServerProcess, count: int, *, keep_alive: bool) -> float:
    """Submissions per second, one ``POST /v1/jobs`` per job, one client after another
    (``http.client``, so the figure is the server's, not a client library's set-up)."""
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
    body = json.dumps({"command": ["true"], "priority": "low"})
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    start = time.perf_counter()
    for _ in range(count):
        if not keep_alive:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("POST", "/v1/jobs", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        if response.status != 201:
            raise RuntimeError(f"submit answered {response.status}")
    conn.close()
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--api-jobs", type=int, default=500)
    parser.add_argument("--src", type=Path, help="run this src directory instead")
    parser.add_argument("--label", default="", help="suffix of the results file")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
        os.environ["PYTHONPATH"] = env["PYTHONPATH"]  # the server process too
    figures: dict[str, tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "state", gpus=8, cycle_interval_s=2.0)  # up default
        server.state_dir.mkdir()
        server.start()
        env |= {"RAILYARD_HOME": str(server.state_dir), "COLUMNS": "160"}
        env.pop("RAILYARD_URL", None)
        env.pop("RAILYARD_TOKEN", None)
        try:
            (node,) = server.request("GET", "/v1/nodes")
            server.request("POST", f"/v1/nodes/{node['name']}/drain", json={"reason": "bench"})
            figures["help"] = timed_cli(["--help"], env, args.repeat)
            submit = ["submit", "--priority", "low", "--", "true"]
            figures["submit"] = timed_cli(submit, env, args.repeat)
            figures["queue"] = timed_cli(["queue"], env, args.repeat)
            api_keep = api_submits(server, args.api_jobs, keep_alive=True)
            api_new = api_submits(server, args.api_jobs, keep_alive=False)
        finally:
            server.stop()
    wall = {k: statistics.median(w) for k, (w, _) in figures.items()}
    cpu = {k: statistics.median(c) for k, (_, c) in figures.items()}

    def row(figure: str, value: float, used: float | None, target: str = "") -> dict[str, Any]:
        return {"figure": figure, "value": value, "cpu": used, "target": target}

    rows = [
        row("railyard --help, s", wall["help"], cpu["help"], "< 0.3"),
        row("railyard queue, s", wall["queue"], cpu["queue"], "< 0.3"),
        row("railyard submit, s", wall["submit"], cpu["submit"], "< 0.15"),
        row("CLI submissions/s", 1 / wall["submit"], None),
        row("API submissions/s, keep-alive", api_keep, None),
        row("API submissions/s, new connection", api_new, None),
    ]
    print(f"{'figure':36} {'value':>9} {'CLI cpu s':>9} {'target':>7}")
    for row in rows:
        used = "" if row["cpu"] is None else f"{row['cpu']:.3f}"
        print(f"{row['figure']:36} {row['value']:>9.3f} {used:>9} {row['target']:>7}")
    name = f"bench_cli{'-' + args.label if args.label else ''}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    samples = {k: {"wall_s": [round(x, 4) for x in w], "cpu_s": [round(x, 4) for x in c]}
               for k, (w, c) in figures.items()}  # fmt: skip
    out = {
        "benchmark": "cli",
        "src": str(args.src or "installed"),
        "rows": rows,
        "samples": samples,
    }
    (RESULTS / name).write_text(json.dumps(out, indent=2))
    print(f"wrote {RESULTS / name}")


if __name__ == "__main__":
    main()
