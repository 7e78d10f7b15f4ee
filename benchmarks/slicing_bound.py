"""How low time slicing could take mean JCT on compare_policies.py's Gavel-profile jobs.

    python benchmarks/slicing_bound.py [--seeds N] [--jobs N]

An idealised time slicer, not railyard's: one pool of 96 GPUs (a gang fits wherever GPUs are
free, no node boundaries), preemption free (no checkpoint, no restart), and rounds of 6
minutes as in Gavel (Narayanan et al., OSDI 2020). Each round it runs jobs in the order of a
key, skipping those that do not fit, until the GPUs run out. The keys: GPU-time attained so
far (Tiresias' 2D-LAS, continuous), GPU-time the time limit leaves (what `las` ranks by at its
defaults, continuous) and GPU-time actually left (knowing every run time: SRPT).

Shortest-first starves big long gangs, so the tail bound of issue 26 (8-GPU gangs' p99 JCT no
worse than fairshare+easy's) is checked too: "limit left" again with railyard's starvation
rule, a job submitted `--starve-days` ago or more runs first (oldest first) to its end. The
same seeded jobs as compare_policies.py's `gavel` rows. Prints mean JCT and 8-GPU gangs' p99
JCT in hours per load and key, and writes benchmarks/results/slicing_bound.json.
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
DAY_S = 86_400.0
LOADS = (0.8, 1.2, 1.5)
KEYS = ("max-min share", "attained", "limit left", "run left (SRPT)")


def jct_h(
    load: float, seed: int, key: str, jobs: int, starve_s: float | None = None
) -> tuple[float, float]:
    """(mean JCT, p99 JCT of 8-GPU gangs), hours, of one seeded workload under `key`."""
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
        if starve_s is not None:  # starving first, oldest first, till done
            rank = np.where(t - submit[active] >= starve_s, -1e18 + submit[active], rank)
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
    return float(done_s.mean()) / 3600, float(np.percentile(done_s[gpus >= 8], 99)) / 3600


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument(
        "--starve-days", type=float, nargs="+", default=[6.0, 7.0, 8.0],
        help="starvation limits to try with 'limit left' (railyard's: 7 days)",
    )  # fmt: skip
    args = ap.parse_args()
    runs = [(key, None) for key in KEYS] + [("limit left", d * DAY_S) for d in args.starve_days]
    labels = [k if s is None else f"limit left, starving at {s / DAY_S:g} d" for k, s in runs]
    rows: dict[float, dict[str, tuple[float, float]]] = {}
    for load in LOADS:
        rows[load] = {}
        for label, (key, starve_s) in zip(labels, runs, strict=True):
            got = [jct_h(load, s, key, args.jobs, starve_s) for s in range(args.seeds)]
            rows[load][label] = (
                statistics.fmean(m for m, _ in got),
                statistics.fmean(p for _, p in got),
            )
    table = Table(title=f"idealised time slicing, Gavel profile, {args.jobs:,} jobs x "
                  f"{args.seeds} seeds: mean JCT h (8-GPU gangs' p99 JCT h)")  # fmt: skip
    table.add_column("slicer", justify="left")
    for load in LOADS:
        table.add_column(f"load {load:.1f}", justify="right")
    for label in labels:
        table.add_row(
            label, *(f"{rows[ld][label][0]:.2f} ({rows[ld][label][1]:.0f})" for ld in LOADS)
        )
    Console(width=120).print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    out = {
        "jobs": args.jobs,
        "seeds": args.seeds,
        "mean_jct_h": {str(ld): {k: v[0] for k, v in r.items()} for ld, r in rows.items()},
        "gang8_p99_jct_h": {str(ld): {k: v[1] for k, v in r.items()} for ld, r in rows.items()},
    }
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
