"""Scheduling policies compared on the Philly-profile synthetic trace, on two clusters.

    python benchmarks/compare_policies.py [--seeds N] [--failures] [--quick] [--only BLUEPRINT]

For gaggle-h100 (96 GPUs) and rail-2048 (2,048 GPUs), runs each policy on the same seeded
Philly-profile workloads (run times resampled from the published Philly CDF, noisy user
walltime estimates) and prints mean JCT and queueing delay per policy, averaged over seeds,
with the change against strict FIFO and against greedy FIFO. Writes
benchmarks/results/compare_policies.json.

Baselines: `fifo` is strict FIFO (a job blocked for GPUs stops every job behind it, Slurm's
sched/builtin and the FIFO of the backfill literature); `fifo-greedy` lets later jobs take any
gap and holds nothing for the blocked job (Kueue's BestEffortFIFO), the stronger baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from railyard.sim.sweep import Scenario, sweep

RESULTS = Path(__file__).parent / "results" / "compare_policies.json"
POLICIES = ("fifo", "fifo-greedy", "easy", "fairshare+easy")
# (blueprint, jobs, offered load, seeds). Philly run times are heavy-tailed (the longest 1% of
# jobs hold about 60% of the GPU-time and run up to 49 days), so a cluster only queues once the
# arrivals span weeks: on rail-2048 that takes 100,000 jobs, and at load 1.0 even they barely
# queue (mean wait 0.01 h), so it runs at 1.5, one seed (a few minutes per policy).
CLUSTERS = (("gaggle-h100", 5000, 1.0, 3), ("rail-2048", 100_000, 1.5, 1))
QUICK = (("gaggle-h100", 1000, 1.0, 2), ("rail-2048", 4000, 1.0, 1))


def change_pct(new: float, base: float) -> str:
    return f"{100.0 * (new - base) / base:+.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=0, help="seeds per cluster (default: table)")
    ap.add_argument("--failures", action="store_true", help="node failures at the Llama 3 rate")
    ap.add_argument("--quick", action="store_true", help="smaller workloads (about a minute)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", help="run one cluster of the table (a blueprint name)")
    args = ap.parse_args()

    clusters = [
        (bp, jobs, load, args.seeds or seeds)
        for bp, jobs, load, seeds in (QUICK if args.quick else CLUSTERS)
        if args.only in (None, bp)
    ]
    scenarios = [
        Scenario(
            bp,
            policy,
            seed=seed,
            synthetic="philly",
            jobs=jobs,
            load=load,
            failures=args.failures,
            coalesce_s=60.0,
        )
        for bp, jobs, load, seeds in clusters
        for policy in POLICIES
        for seed in range(seeds)
    ]
    t0 = time.perf_counter()
    runs = sweep(scenarios, workers=args.workers)
    wall_s = time.perf_counter() - t0

    rows: list[dict[str, Any]] = []
    for bp, jobs, load, seeds in clusters:
        mine = [r for s, r in zip(scenarios, runs, strict=True) if s.blueprint == bp]
        jct_h = {
            p: statistics.fmean(r["jct"]["mean_s"] for r in mine if r["policy"] == p) / 3600
            for p in POLICIES
        }
        wait_h = {
            p: statistics.fmean(r["queueing"]["mean_s"] for r in mine if r["policy"] == p) / 3600
            for p in POLICIES
        }
        wins = {
            p: sum(
                r["jct"]["mean_s"] < g["jct"]["mean_s"]
                for r in mine
                if r["policy"] == p
                for g in mine
                if g["policy"] == "fifo-greedy" and g["seed"] == r["seed"]
            )
            for p in POLICIES
        }
        for p in POLICIES:
            rows.append(
                {
                    "blueprint": bp,
                    "jobs": jobs,
                    "load": load,
                    "seeds": seeds,
                    "policy": p,
                    "mean_jct_h": jct_h[p],
                    "mean_wait_h": wait_h[p],
                    "vs_fifo": change_pct(jct_h[p], jct_h["fifo"]),
                    "vs_fifo_greedy": change_pct(jct_h[p], jct_h["fifo-greedy"]),
                    "seeds_better_than_greedy": wins[p],
                }
            )

    title = "Philly-profile trace, mean over seeds" + (", with failures" if args.failures else "")
    table = Table(title=title)
    columns = ("cluster", "jobs", "load", "policy", "JCT mean h", "wait mean h", "vs fifo",
               "vs greedy", "seeds < greedy")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col in ("cluster", "policy") else "right")
    for r in rows:
        table.add_row(
            r["blueprint"],
            f"{r['jobs']:,}",
            f"{r['load']:.1f}",
            r["policy"],
            f"{r['mean_jct_h']:.2f}",
            f"{r['mean_wait_h']:.2f}",
            r["vs_fifo"],
            r["vs_fifo_greedy"],
            f"{r['seeds_better_than_greedy']}/{r['seeds']}",
        )
    console = Console()
    console.print(table)
    console.print(f"{len(scenarios)} simulations in {wall_s:.0f} s")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"seeds": args.seeds, "failures": args.failures, "wall_s": wall_s, "rows": rows},
            indent=1,
        )
        + "\n"
    )
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
