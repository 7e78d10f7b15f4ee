"""How low time slicing could take mean JCT on compare_policies.py's Gavel-profile jobs.

    python benchmarks/slicing_bound.py [--seeds N] [--jobs N]
    python benchmarks/slicing_bound.py --traces

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

`--traces` runs the ideal slicer on the shipped public traces instead (Gavel's Philly VCs,
each on one pool of its cluster's GPUs): Gavel's LAS (max-min share of time, issue 56's
reference for `las`'s mean JCT), Tiresias' LAS, both under railyard's 14-day starvation rule
and with SRPT, and writes benchmarks/results/slicing_bound_traces.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from railyard.data import traces as shipped_traces
from railyard.sim.synthetic import generate

RESULTS = Path(__file__).parent / "results" / "slicing_bound.json"
TRACE_RESULTS = Path(__file__).parent / "results" / "slicing_bound_traces.json"
TRACES_DIR = Path(shipped_traces.__file__).parent
GPUS = 96  # gaggle-h100: twelve 8-GPU nodes
ROUND_S = 360.0
DAY_S = 86_400.0
LOADS = (0.8, 1.2, 1.5)
KEYS = ("max-min share", "attained", "limit left", "run left (SRPT)")


def slice_rounds(
    submit: np.ndarray,
    gpus: np.ndarray,
    run_s: np.ndarray,
    limit_s: np.ndarray,
    pool_gpus: int,
    key: str,
    starve_s: float | None = None,
    starve_on_wait: bool = True,
    unsliced_after_s: float = math.inf,
) -> np.ndarray:
    """Each job's JCT in seconds under the ideal slicer: rounds of `ROUND_S`, jobs taken in
    the order of `key` while GPUs last. A job starves once it has waited (time in the
    system less time run, as `model.starving_since_t_s` reads it since issue 56; with
    `starve_on_wait` False, time since submit, the rule of the synthetic rows' figures)
    `starve_s`; starving jobs go first, oldest first, to their end. A job that has run
    `unsliced_after_s` keeps its GPUs to its end (`las`'s `unsliced_after_s`)."""
    done_s = np.full(len(submit), np.nan)
    ran_s = np.zeros(len(submit))
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
        if starve_s is not None:
            waited_s = t - submit[active] - (ran_s[active] if starve_on_wait else 0.0)
            rank = np.where(waited_s >= starve_s, -1e18 + submit[active], rank)
        rank = np.where(ran_s[active] >= unsliced_after_s, -2e18, rank)
        free, chosen = pool_gpus, []
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
    return done_s


def jct_h(
    load: float, seed: int, key: str, jobs: int, starve_s: float | None = None
) -> tuple[float, float]:
    """(mean JCT, p99 JCT of 8-GPU gangs), hours, of one seeded workload under `key`."""
    w = generate("gavel", jobs=jobs, cluster_gpus=GPUS, load=load, seed=seed, max_gpus=8)
    gpus = np.array([j.gpus for j in w.jobs])
    done_s = slice_rounds(
        np.array([j.submit_s for j in w.jobs]),
        gpus,
        np.array([j.runtime_s for j in w.jobs]),
        np.array([j.walltime_s for j in w.jobs], dtype=float),
        GPUS,
        key,
        starve_s,
        starve_on_wait=False,
    )
    return float(done_s.mean()) / 3600, float(np.percentile(done_s[gpus >= 8], 99)) / 3600


TRACE_RUNS = (
    ("Gavel's LAS (max-min share)", "max-min share", None, math.inf),
    ("Tiresias' LAS (attained)", "attained", None, math.inf),
    ("attained, starving at 14 d", "attained", 14 * DAY_S, math.inf),
    *(
        (f"attained, unsliced after {h} h{label}", "attained", starve_s, h * 3600.0)
        for h in (1, 6, 24, 72)
        for label, starve_s in (("", None), (", starving at 7 d", 7 * DAY_S))
    ),
    ("SRPT (knows run times)", "run left (SRPT)", None, math.inf),
    ("SRPT, starving at 14 d", "run left (SRPT)", 14 * DAY_S, math.inf),
    ("SRPT, unsliced after 1 h", "run left (SRPT)", None, 3600.0),
)
"""The ideal slicer on the shipped public traces: Gavel's LAS, issue 56's reference for
`las`'s mean JCT, Tiresias' rule, railyard's tail rules over it (starvation; a job that has
run long enough runs to its end), and what knowing every run time would allow (a cluster
whose jobs carry tight time limits)."""


def trace_jct_h(
    t: dict[str, Any], key: str, starve_s: float | None, unsliced_after_s: float = math.inf
) -> tuple[float, float]:
    """(mean JCT, p99 JCT), hours, of one shipped trace on one pool of its GPUs."""
    with (TRACES_DIR / f"{t['name']}.csv").open() as f:
        rows = list(csv.DictReader(f))
    run_s = np.array([float(r["runtime_s"]) for r in rows])
    done_s = slice_rounds(
        np.array([float(r["submit_s"]) for r in rows]),
        np.array([int(r["gpus"]) for r in rows]),
        run_s,
        run_s,
        t["nodes"] * t["gpus_per_node"],
        key,
        starve_s,
        unsliced_after_s=unsliced_after_s,
    )
    return float(done_s.mean()) / 3600, float(np.percentile(done_s, 99)) / 3600


def traces_main() -> None:
    """Mean JCT (p99) of the ideal slicer on each shipped trace, no node boundaries and free
    preemption: the most any slicer could reach there with each rule."""
    index = [
        t
        for t in json.loads((TRACES_DIR / "traces.json").read_text())
        if (TRACES_DIR / f"{t['name']}.csv").exists()
    ]
    rows = {
        label: [trace_jct_h(t, key, starve_s, after_s) for t in index]
        for label, key, starve_s, after_s in TRACE_RUNS
    }
    table = Table(title="idealised time slicing on the shipped public traces (one pool, "
                  "free preemption, 6-minute rounds): mean JCT h (p99 JCT h)")  # fmt: skip
    table.add_column("slicer", justify="left")
    for t in index:
        table.add_column(f"{t['name'].removeprefix('gavel-')} ({t['set']})", justify="right")
    for label, got in rows.items():
        table.add_row(label, *(f"{m:.1f} ({p:.0f})" for m, p in got))
    Console(width=160).print(table)
    TRACE_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    out = {
        t["name"]: {label: {"mean_jct_h": got[i][0], "p99_jct_h": got[i][1]}
                    for label, got in rows.items()}
        for i, t in enumerate(index)
    }  # fmt: skip
    TRACE_RESULTS.write_text(json.dumps(out, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument(
        "--starve-days", type=float, nargs="+", default=[6.0, 7.0, 8.0],
        help="starvation limits to try with 'limit left' (railyard's: 7 days)",
    )  # fmt: skip
    ap.add_argument(
        "--traces", action="store_true",
        help="the shipped public traces (Gavel's Philly VCs) instead of the Gavel profile",
    )  # fmt: skip
    args = ap.parse_args()
    if args.traces:
        traces_main()
        return
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
