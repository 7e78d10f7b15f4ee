"""How low time slicing could take mean JCT on compare_policies.py's Gavel-profile jobs.

    python benchmarks/slicing_bound.py [--seeds N] [--jobs N]

An idealised time slicer, not railyard's: one pool of 96 GPUs (a gang fits wherever GPUs are
free, no node boundaries), preemption free (no checkpoint, no restart), and rounds of 6
minutes as in Gavel (Narayanan et al., OSDI 2020). Each round it runs jobs in the order of a
key, skipping those that do not fit, until the GPUs run out. The keys: GPU-time attained so
far (Tiresias' 2D-LAS, continuous), GPU-time the time limit leaves (what `las` ranks by at its
defaults, continuous) and GPU-time actually left (knowing every run time: SRPT). The same
seeded jobs as compare_policies.py's `gavel` rows. Prints mean JCT in hours per load and key
and writes benchmarks/results/slicing_bound.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from railyard.sim.synthetic import generate

RESULTS = Path(__file__).parent / "results" / "slicing_bound.json"
GPUS = 96  # gaggle-h100: twelve 8-GPU nodes
ROUND_S = 360.0
LOADS = (1.2, 1.5)
KEYS = ("max-min share", "attained", "limit left", "run left (SRPT)")


def mean_jct_h(load: float, seed: int, key: str, jobs: int) -> float:
    w = generate("gavel", jobs=jobs, cluster_gpus=GPUS, load=load, seed=seed, max_gpus=8)
    submit = np.array([j.submit_s for j in w.jobs])
    gpus = np.array([j.gpus for j in w.jobs])
    run_s = np.array([j.runtime_s for j in w.jobs])
    limit_s = np.array([j.walltime_s for j in w.jobs], dtype=float)
    done_s = np.full(len(w.jobs), np.nan)
    ran_s = np.zeros(len(w.jobs))
    t = 0.0
    while np.isnan(done_s).any():
        active = np.where((submit <= t) & np.isnan(done_s))[0]
        if len(active) == 0:
            t = float(np.ceil(submit[np.isnan(done_s)].min() / ROUND_S) * ROUND_S)
            continue
        g = gpus[active]
        if key == "max-min share":
            rank = ran_s[active] / np.maximum(t - submit[active], 1.0)
        elif key == "attained":
            rank = ran_s[active] * g
        elif key == "limit left":
            rank = (limit_s[active] - ran_s[active]) * g
        else:
            rank = (run_s[active] - ran_s[active]) * g
        free, chosen = GPUS, []
        for i in active[np.lexsort((submit[active], rank))]:
            if gpus[i] <= free:
                chosen.append(i)
                free -= gpus[i]
        picked = np.array(chosen, dtype=int)
        left = run_s[picked] - ran_s[picked]
        ends = left <= ROUND_S
        done_s[picked[ends]] = t + left[ends] - submit[picked[ends]]
        ran_s[picked] += np.minimum(ROUND_S, left)
        t += ROUND_S
    return float(done_s.mean()) / 3600


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2000)
    args = ap.parse_args()
    rows = {
        load: {
            key: statistics.fmean(mean_jct_h(load, s, key, args.jobs) for s in range(args.seeds))
            for key in KEYS
        }
        for load in LOADS
    }
    table = Table(title=f"idealised time slicing, Gavel profile, {args.jobs:,} jobs x "
                  f"{args.seeds} seeds: mean JCT h")  # fmt: skip
    table.add_column("load", justify="right")
    for key in KEYS:
        table.add_column(key, justify="right")
    for load, by_key in rows.items():
        table.add_row(f"{load:.1f}", *(f"{by_key[k]:.2f}" for k in KEYS))
    Console(width=120).print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    out = {
        "jobs": args.jobs,
        "seeds": args.seeds,
        "mean_jct_h": {str(k): v for k, v in rows.items()},
    }
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
