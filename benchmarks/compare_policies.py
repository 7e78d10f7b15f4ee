"""Scheduling policies compared on Philly-profile synthetic traces, time slicing included.

    python benchmarks/compare_policies.py [--seeds N] [--failures] [--quick] [--only BLUEPRINT]

Runs each policy on the same seeded Philly-profile workloads (run times resampled from the
published Philly CDF, noisy user walltime estimates) and prints mean JCT, mean queueing delay
and the p99 JCT of large gangs (9+ GPUs) per policy, averaged over seeds, with the change
against `fairshare+easy`. Every job is preemptible (time slicing needs it; the other policies
then let preemptible jobs backfill across reservations and yield) and every preemption pays
for it: a checkpoint at the Young interval (60 s each) and 300 s to restart. Writes
benchmarks/results/compare_policies.json.

Policies: `fifo` is strict FIFO (a job blocked for GPUs stops every job behind it, Slurm's
sched/builtin); `easy` is FIFO with EASY backfill (Slurm's default); `fairshare+easy` adds
fair-share ordering; `las` is Tiresias' discretized least-attained-service time slicing
(Gu et al., NSDI 2019) with its default two thresholds and a 10-minute quantum.
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

from railyard.sim.checkpoints import CheckpointPolicy
from railyard.sim.sweep import Scenario, sweep

RESULTS = Path(__file__).parent / "results" / "compare_policies.json"
POLICIES = ("fifo", "easy", "fairshare+easy", "las")
BASELINE = "fairshare+easy"
COSTS = CheckpointPolicy(cost_s=60.0, restart_s=300.0)  # Young interval by default
# (blueprint, jobs, offered load, seeds). Philly run times are heavy-tailed (the longest 1% of
# jobs hold about 60% of the GPU-time and run up to 49 days): at load 1.0 most of a job's JCT
# is its own run time, at 1.5 queueing dominates, which is where time slicing pays.
CLUSTERS = (("gaggle-h100", 5000, 1.0, 3), ("gaggle-h100", 5000, 1.5, 3))
QUICK = (("gaggle-h100", 1000, 1.0, 1), ("gaggle-h100", 1000, 1.5, 1))


def change_pct(new: float, base: float) -> str:
    return f"{100.0 * (new - base) / base:+.1f}%"


def _big_p99_s(run: dict[str, Any]) -> float:
    """p99 JCT of gangs of 9 GPUs or more (the jobs time slicing could starve)."""
    sizes = run["by_size"]
    values = [sizes[k]["jct"]["p99_s"] for k in ("9-64", "65+") if k in sizes]
    return max(values) if values else 0.0


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
            checkpoint=COSTS,
            preemptible=True,
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
        mine = [
            (s, r)
            for s, r in zip(scenarios, runs, strict=True)
            if (s.blueprint, s.jobs, s.load) == (bp, jobs, load)
        ]

        def mean(policy: str, get: Any, mine: list[Any] = mine) -> float:
            return statistics.fmean(get(r) for s, r in mine if s.policy == policy)

        jct_h = {p: mean(p, lambda r: r["jct"]["mean_s"]) / 3600 for p in POLICIES}
        for p in POLICIES:
            rows.append(
                {
                    "blueprint": bp,
                    "jobs": jobs,
                    "load": load,
                    "seeds": seeds,
                    "policy": p,
                    "mean_jct_h": jct_h[p],
                    "mean_wait_h": mean(p, lambda r: r["queueing"]["mean_s"]) / 3600,
                    "big_gang_p99_jct_h": mean(p, _big_p99_s) / 3600,
                    "preemptions": mean(p, lambda r: r["preemptions"]),
                    "goodput": mean(p, lambda r: r["goodput"]),
                    "vs_baseline": change_pct(jct_h[p], jct_h[BASELINE]),
                    "x_lower_than_baseline": jct_h[BASELINE] / jct_h[p],
                }
            )

    title = "Philly-profile traces, every job preemptible, checkpoint and restart costs charged"
    if args.failures:
        title += ", with failures"
    table = Table(title=title)
    columns = ("cluster", "jobs", "load", "policy", "JCT mean h", "wait mean h",
               "9+ GPU p99 h", "preempts", "goodput", f"vs {BASELINE}")  # fmt: skip
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
            f"{r['big_gang_p99_jct_h']:.0f}",
            f"{r['preemptions']:.0f}",
            f"{r['goodput']:.3f}",
            f"{r['vs_baseline']} ({r['x_lower_than_baseline']:.2f}x)",
        )
    console = Console(width=140)
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
