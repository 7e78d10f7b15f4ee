"""Benchmark of the simulator, `railyard.sim`: a 100,000-job trace on rail-2048 (2,048 H100).

    python benchmarks/bench_sim.py [--jobs N] [--coalesce S] [--policy P] [--profile]

Philly-profile synthetic jobs at offered load 0.9, node failures at the Llama 3 rate with
Young-interval checkpoints, fair share with EASY backfill. Times the simulation only (the
workload is generated first), prints events/s, jobs/s and cycles, and writes
benchmarks/results/bench_sim.json. `--profile` adds where the time goes (cProfile, top 15).

The scheduler cycle is about 80% of the time (it rebuilds its snapshot and books every running
job each call), so events are batched into one cycle per `--coalesce` seconds (default 300 s,
like a scheduler interval); `--coalesce 0` runs one cycle per distinct event time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from railyard.blueprint import load
from railyard.sim.cluster import cluster_nodes
from railyard.sim.driver import SimConfig, Simulation
from railyard.sim.failures import FailureModel
from railyard.sim.metrics import summarize
from railyard.sim.sweep import policy_config
from railyard.sim.synthetic import generate

RESULTS = Path(__file__).parent / "results" / "bench_sim.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--coalesce", type=float, default=300.0, help="seconds per event cycle batch")
    ap.add_argument("--policy", default="fairshare+easy")
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    nodes = cluster_nodes(load("rail-2048").blueprint)
    gpus = sum(n.gpus for n in nodes)
    t0 = time.perf_counter()
    workload = generate("philly", jobs=args.jobs, cluster_gpus=gpus, load=args.load, seed=0)
    gen_s = time.perf_counter() - t0
    config = SimConfig(
        scheduler=policy_config(args.policy),
        failures=FailureModel(),
        coalesce_s=args.coalesce,
        seed=0,
    )
    sim = Simulation(nodes, workload, config)
    profiler = cProfile.Profile() if args.profile else None
    t0 = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    log = sim.run()
    if profiler is not None:
        profiler.disable()
    wall_s = time.perf_counter() - t0
    summary = summarize(log)
    result = {
        "machine": {
            "python": platform.python_version(),
            "cpu": platform.machine(),
            "cpus": os.cpu_count(),
        },
        "scenario": {
            "blueprint": "rail-2048",
            "gpus": gpus,
            "jobs": args.jobs,
            "profile": "philly",
            "load": args.load,
            "policy": args.policy,
            "failures": "llama3 rate",
            "coalesce_s": args.coalesce,
        },
        "generate_s": gen_s,
        "wall_s": wall_s,
        "events": log.events,
        "cycles": log.cycles,
        "events_per_s": log.events / wall_s,
        "jobs_per_s": args.jobs / wall_s,
        "cycles_per_s": log.cycles / wall_s,
        "simulated_days": log.end_t_s / 86400,
        "jct_mean_h": summary["jct"]["mean_s"] / 3600,
        "queueing_mean_h": summary["queueing"]["mean_s"] / 3600,
        "utilization": summary["utilization"],
        "goodput": summary["goodput"],
        "node_failures": summary["node_failures"],
        "under_60_s": wall_s < 60,
    }
    table = Table(title=f"railyard.sim: {args.jobs:,} jobs on rail-2048 ({gpus} GPUs)")
    for col in ("wall s", "events", "events/s", "jobs/s", "cycles", "sim days", "JCT mean h"):
        table.add_column(col, justify="right")
    table.add_row(
        f"{wall_s:.1f}",
        f"{log.events:,}",
        f"{log.events / wall_s:,.0f}",
        f"{args.jobs / wall_s:,.0f}",
        f"{log.cycles:,}",
        f"{log.end_t_s / 86400:.1f}",
        f"{result['jct_mean_h']:.2f}",
    )
    Console().print(table)
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(15)
        print(out.getvalue())
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
