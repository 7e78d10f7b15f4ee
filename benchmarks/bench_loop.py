"""How busy the scheduler loop keeps the GPUs: drain N short jobs through a real `railyard up`.

Submits ``--jobs`` one-GPU jobs of ``--job-s`` seconds each (``sleep``) in one batch to a
server with ``--gpus`` declared GPUs and the default 2 s idle cycle, waits until every job has
ended, and reports from the jobs' recorded start and end times:

- makespan: first start to last end;
- average busy GPUs: the sum of the jobs' run times over the makespan;
- the ideal makespan (jobs x job_s / gpus) for comparison.

Run: ``python benchmarks/bench_loop.py [--jobs 500] [--gpus 8] [--job-s 1]``; prints a table and
writes ``benchmarks/results/bench_loop.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.server_proc import ServerProcess

RESULTS = Path(__file__).parent / "results"


def drain(server: ServerProcess, jobs: int, job_s: float) -> dict[str, float]:
    spec = {"command": ["sleep", f"{job_s:g}"], "priority": "low"}
    for first in range(0, jobs, 500):
        batch = {"jobs": [spec] * min(500, jobs - first)}
        server.request("POST", "/v1/jobs/batch", json=batch)
    deadline = time.monotonic() + 60 + jobs * job_s * 2
    while True:
        rows = server.request("GET", "/v1/jobs", params={"limit": jobs + 10})
        if all(r["state"] in ("completed", "failed", "cancelled") for r in rows):
            break
        if time.monotonic() > deadline:
            raise RuntimeError("jobs did not drain in time")
        time.sleep(1.0)
    failed = [r["id"] for r in rows if r["state"] != "completed"]
    if failed:
        raise RuntimeError(f"{len(failed)} jobs did not complete: {failed[:5]}")
    first_start = min(r["start_t_s"] for r in rows)
    last_end = max(r["end_t_s"] for r in rows)
    busy_s = sum(r["end_t_s"] - r["start_t_s"] for r in rows)
    makespan = last_end - first_start
    return {"makespan_s": makespan, "busy_gpus": busy_s / makespan}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--job-s", type=float, default=1.0)
    parser.add_argument("--cycle-interval", type=float, default=2.0, help="idle poll, s")
    parser.add_argument("--label", default="", help="suffix of the results file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(
            Path(tmp) / "state", gpus=args.gpus, cycle_interval_s=args.cycle_interval
        )
        server.state_dir.mkdir()
        server.start()
        try:
            figures = drain(server, args.jobs, args.job_s)
        finally:
            server.stop()
    ideal = args.jobs * args.job_s / args.gpus
    rows = [
        {"figure": "makespan s", "value": figures["makespan_s"], "ideal": ideal},
        {"figure": "average busy GPUs", "value": figures["busy_gpus"], "ideal": args.gpus},
    ]
    shape = f"{args.jobs} jobs of {args.job_s:g} s on {args.gpus} GPUs"
    print(f"{shape}, idle cycle {args.cycle_interval:g} s")
    print(f"{'figure':20} {'value':>9} {'ideal':>9}")
    for row in rows:
        print(f"{row['figure']:20} {row['value']:>9.2f} {row['ideal']:>9.2f}")
    name = f"bench_loop{'-' + args.label if args.label else ''}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {"jobs": args.jobs, "gpus": args.gpus, "job_s": args.job_s}
    (RESULTS / name).write_text(json.dumps({"benchmark": "loop", **meta, "rows": rows}, indent=2))
    print(f"wrote {RESULTS / name}")


if __name__ == "__main__":
    main()
