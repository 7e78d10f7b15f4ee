"""How busy the scheduler loop keeps the GPUs: drain N short jobs through a real `railyard up`.

Submits ``--jobs`` one-GPU jobs of ``--job-s`` seconds each (``sleep``) in one batch to a
server with ``--gpus`` declared GPUs and the default 2 s idle cycle, waits until every job has
ended, and reports from the jobs' recorded start and end times:

- makespan: the first job's real start to the last one's real end (each job writes both);
- average busy GPUs: the sum of the jobs' real run times over the makespan;
- average held GPUs: the same from the store's start and end times, i.e. what the scheduler
  counted as taken (a GPU stays held from a job's exit until the loop settles it);
- the ideal makespan (jobs x job_s / gpus) for comparison;
- where a GPU's time between two jobs goes, as medians over the jobs: launch (the store's
  start time, i.e. the step's decision, to the command's first line: the rest of the step,
  the executor's start, the wrapper's interpreter) and settle (the command's last line to the
  store's end time: the wrapper's exit, the exit watcher's wake-up, the next step);
- the loop's steps and their mean time, from the server's own ``/metrics``.

The issue's target (issue 21): 500 one-second jobs on 8 GPUs in at most 70 s (ideal 62.5 s).

Run: ``python benchmarks/bench_loop.py [--jobs 500] [--gpus 8] [--job-s 1]``; prints a table and
writes ``benchmarks/results/bench_loop.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.server_proc import ServerProcess

from railyard.control.store.tables import JobState

RESULTS = Path(__file__).parent / "results"


UNFINISHED = [state.value for state in JobState if not state.finished]


def drain(server: ServerProcess, jobs: int, job_s: float, marks: Path) -> dict[str, float]:
    """Run the jobs; each writes when it really began and ended (``date``, no interpreter), so
    busy time is the processes' own, not the store's start-to-settlement span."""
    script = (
        f'b=$(date +%s.%N); sleep {job_s:g}; echo "$b $(date +%s.%N)" > {marks}/$RAILYARD_JOB_ID'
    )
    spec = {"command": ["sh", "-c", script], "gpus": 1, "priority": "low"}
    for first in range(0, jobs, 500):
        batch = {"jobs": [spec] * min(500, jobs - first)}
        server.request("POST", "/v1/jobs/batch", json=batch)
    deadline = time.monotonic() + 60 + jobs * job_s * 2
    # Poll for one unfinished job, not the whole list: listing 500 jobs a second takes the
    # server's interpreter from the loop it measures (3% of its time, py-spy).
    while server.request("GET", "/v1/jobs", params={"state": UNFINISHED, "limit": 1}):
        if time.monotonic() > deadline:
            raise RuntimeError("jobs did not drain in time")
        time.sleep(1.0)
    rows = server.request("GET", "/v1/jobs", params={"limit": jobs + 10})
    failed = [r["id"] for r in rows if r["state"] != "completed"]
    if failed:
        raise RuntimeError(f"{len(failed)} jobs did not complete: {failed[:5]}")
    spans = [tuple(map(float, (marks / r["id"]).read_text().split())) for r in rows]
    makespan = max(end for _, end in spans) - min(begin for begin, _ in spans)
    held_s = sum(r["end_t_s"] - r["start_t_s"] for r in rows)
    held_span = max(r["end_t_s"] for r in rows) - min(r["start_t_s"] for r in rows)
    steps = _histogram(server, "railyard_loop_step_duration_seconds")
    paired = list(zip(rows, spans, strict=True))
    return {
        "makespan_s": makespan,
        "busy_gpus": sum(end - begin for begin, end in spans) / makespan,
        "held_gpus": held_s / held_span,
        # where a GPU's time between two jobs goes: the decision to the command's first line,
        # and the command's end to the store's settlement
        "launch_s": statistics.median(b - r["start_t_s"] for r, (b, _) in paired),
        "settle_s": statistics.median(r["end_t_s"] - e for r, (_, e) in paired),
        "steps": steps[1],
        "step_mean_s": steps[0] / max(1.0, steps[1]),
    }


def _histogram(server: ServerProcess, name: str) -> tuple[float, float]:
    """(sum, count) of a histogram in the server's /metrics."""
    text = server.call("GET", "/metrics").text
    values = {}
    for line in text.splitlines():
        for part in ("_sum", "_count"):
            if line.startswith(name + part + " "):
                values[part] = float(line.split()[1])
    return values.get("_sum", 0.0), values.get("_count", 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--job-s", type=float, default=1.0)
    parser.add_argument("--cycle-interval", type=float, default=2.0, help="idle poll, s")
    parser.add_argument("--label", default="", help="suffix of the results file")
    parser.add_argument("--src", type=Path, help="run this src directory instead (a baseline)")
    args = parser.parse_args()
    if args.src is not None:
        os.environ["PYTHONPATH"] = str(args.src.resolve())  # the server process's railyard
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(
            Path(tmp) / "state", gpus=args.gpus, cycle_interval_s=args.cycle_interval
        )
        server.state_dir.mkdir()
        server.start()
        marks = Path(tmp) / "marks"
        marks.mkdir()
        try:
            figures = drain(server, args.jobs, args.job_s, marks)
        finally:
            server.stop()
    ideal = args.jobs * args.job_s / args.gpus
    rows = [
        {"figure": "makespan s", "value": figures["makespan_s"], "ideal": ideal},
        {"figure": "average busy GPUs", "value": figures["busy_gpus"], "ideal": args.gpus},
        {"figure": "average held GPUs", "value": figures["held_gpus"], "ideal": args.gpus},
        {"figure": "launch s (median)", "value": figures["launch_s"], "ideal": 0.0},
        {"figure": "settle s (median)", "value": figures["settle_s"], "ideal": 0.0},
        {"figure": "loop steps", "value": figures["steps"], "ideal": args.jobs / args.gpus},
        {"figure": "step s (mean)", "value": figures["step_mean_s"], "ideal": 0.0},
    ]
    shape = f"{args.jobs} jobs of {args.job_s:g} s on {args.gpus} GPUs"
    print(f"{shape}, idle cycle {args.cycle_interval:g} s")
    print(f"{'figure':20} {'value':>9} {'ideal':>9}")
    for row in rows:
        print(f"{row['figure']:20} {row['value']:>9.2f} {row['ideal']:>9.2f}")
    name = f"bench_loop{'-' + args.label if args.label else ''}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {"jobs": args.jobs, "gpus": args.gpus, "job_s": args.job_s, "src": str(args.src or "")}
    (RESULTS / name).write_text(json.dumps({"benchmark": "loop", **meta, "rows": rows}, indent=2))
    print(f"wrote {RESULTS / name}")


if __name__ == "__main__":
    main()
