"""Build and plan fabrics of growing size; the issue's target is a 16,384-GPU rail-optimized
fabric in under 2 s on a 2-core machine.

Run: ``python benchmarks/bench_plan.py [--repeat N]``. Prints a table and writes
``benchmarks/results/bench_plan.json``. Times are wall-clock medians of N runs in one process
(``time.perf_counter``), after one warm-up run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import rail_optimized, time_runs

from railyard.blueprint import load
from railyard.fabric.build import build_fabric
from railyard.plan.report import make_plan

RESULTS = Path(__file__).parent / "results" / "bench_plan.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cases = {
        "gaggle-h100 (96 GPUs)": load("gaggle-h100").blueprint,
        "rail-2048 (2,048 GPUs)": load("rail-2048").blueprint,
        "rail-optimized 16,384 GPUs (QM9700)": rail_optimized(16384),
    }
    rows = []
    print(f"{'case':40} {'switches':>9} {'links':>8} {'build ms':>9} {'plan ms':>9} {'target':>8}")
    for name, bp in cases.items():
        fabric = build_fabric(bp)
        build = time_runs(lambda bp=bp: build_fabric(bp), args.repeat)
        plan = time_runs(lambda bp=bp: make_plan(bp), args.repeat)
        target_s = 2.0 if "16,384" in name else None
        row = {
            "case": name,
            "switches": len(fabric.switches),
            "links": fabric.num_links,
            "build_median_s": statistics.median(build),
            "build_plus_plan_median_s": statistics.median(plan),
            "plan_max_s": max(plan),
            "target_s": target_s,
            "meets_target": None if target_s is None else statistics.median(plan) < target_s,
        }
        rows.append(row)
        print(
            f"{name:40} {row['switches']:>9,} {row['links']:>8,} "
            f"{row['build_median_s'] * 1e3:>9.1f} {row['build_plus_plan_median_s'] * 1e3:>9.1f} "
            f"{'< 2 s' if target_s else '':>8}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "plan", "rows": rows}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
