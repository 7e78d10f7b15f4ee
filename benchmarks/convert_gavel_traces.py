"""Gavel's Philly-derived per-VC traces, cut to slices and written as railyard CSV.

    python benchmarks/convert_gavel_traces.py [--gavel GIT_DIR] [--jobs N]

Gavel (Narayanan et al., OSDI 2020; github.com/stanford-futuredata/gavel, MIT licence)
publishes traces derived from Microsoft's Philly cluster, one per virtual cluster (VC) and
seed (`scheduler/traces/msr/seed=N/<vc>.trace`; a seed draws the models, the VC's arrivals
and sizes stay). This reads them from a Gavel git directory (a bare clone is enough), turns
steps into run times with Gavel's V100 table (`railyard.sim.gavel`), keeps the first `--jobs`
arrivals and writes `src/railyard/data/traces/gavel-<vc>-s<seed>.csv` (id, submit_s, gpus,
runtime_s, user: each job its own user, as Gavel's fairness is per job), plus
`traces.json` with each slice's source, licence, jobs, GPU-time and the cluster size
`compare_policies.py` runs it on: 8-GPU nodes enough for an offered load of about `LOAD`.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import tempfile
from pathlib import Path

from railyard.sim.traces import load_trace

OUT = Path(__file__).parent.parent / "src" / "railyard" / "data" / "traces"
MIRROR = "/work/.mirror/stanford-futuredata+gavel/repo"
GAVEL_COMMIT = "HEAD"
LOAD = 1.0
# (vc, seed, set): "tune" slices chose las's defaults; "held-out" ones only judged them.
SLICES = (
    ("0e4a51", 0, "tune"),
    ("6214e9", 0, "tune"),
    ("0e4a51", 1, "held-out"),
    ("b436b2", 0, "held-out"),
    ("ee9e8c", 0, "held-out"),
    ("7f04ca", 0, "held-out"),
)


def _trace_text(git_dir: str, commit: str, vc: str, seed: int) -> str:
    path = f"{commit}:scheduler/traces/msr/seed={seed}/{vc}.trace"
    return subprocess.run(
        ["git", "-C", git_dir, "show", path], check=True, capture_output=True, text=True
    ).stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gavel", default=MIRROR, help="Gavel's git directory")
    ap.add_argument("--commit", default=GAVEL_COMMIT)
    ap.add_argument("--jobs", type=int, default=1000, help="first N arrivals of each trace")
    args = ap.parse_args()
    commit = subprocess.run(
        ["git", "-C", args.gavel, "rev-parse", args.commit],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    OUT.mkdir(parents=True, exist_ok=True)
    index = []
    for vc, seed, role in SLICES:
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / f"{vc}.trace"
            src.write_text(_trace_text(args.gavel, commit, vc, seed))
            jobs = load_trace(src, "gavel").jobs[: args.jobs]
        name = f"gavel-{vc}-s{seed}"
        with (OUT / f"{name}.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(("id", "submit_s", "gpus", "runtime_s", "user"))
            for j in jobs:
                w.writerow((j.id, f"{j.submit_s:.0f}", j.gpus, f"{j.runtime_s:.1f}", j.user))
        span_s = max(j.submit_s for j in jobs)
        gpu_s = sum(j.gpus * j.runtime_s for j in jobs)
        widest = max(j.gpus for j in jobs)
        nodes = max(math.ceil(widest / 8), round(gpu_s / span_s / 8 / LOAD))
        index.append(
            {
                "name": name,
                "set": role,
                "source": f"github.com/stanford-futuredata/gavel@{commit} "
                f"scheduler/traces/msr/seed={seed}/{vc}.trace, first {len(jobs)} jobs",
                "licence": "MIT (Copyright (c) 2020 Stanford Future Data Systems)",
                "jobs": len(jobs),
                "gpu_hours": round(gpu_s / 3600, 1),
                "span_days": round(span_s / 86400, 1),
                "widest_gpus": widest,
                "nodes": nodes,
                "gpus_per_node": 8,
                "offered_load": round(gpu_s / span_s / (nodes * 8), 3),
            }
        )
        print(index[-1])
    (OUT / "traces.json").write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main()
