"""Alibaba's openb GPU trace (cluster-trace-gpu-v2023), cut to its busy weeks, as railyard CSV.

    python benchmarks/convert_openb_trace.py [--clusterdata GIT_DIR]

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC '23, publish `cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv`
in github.com/alibaba/clusterdata: 8,152 tasks (pods) of a production GPU cluster with their
GPUs asked, creation, scheduling and deletion times. A third public trace beside Gavel's
Philly-derived ones, from another company and year, of 1-8-GPU tasks. What is kept, and why:

- tasks that asked for whole GPUs (1 whole, or 2-8): railyard allocates whole GPUs, and a
  GPU-sharing task (a fraction of one GPU) would be charged a whole one;
- tasks that were scheduled and ended inside the trace: their run time is deletion minus
  scheduled time, as observed (a task still running at the trace's end has no run time);
- tasks created from `FIRST_S` on: the trace's last 35 days, where 3,600 of those 3,609
  tasks arrive (before it, a few long-lived tasks over 114 days).

Failed tasks are kept for the time they held their GPUs. Each task is its own user.

The trace's terms allow use "for research or study" and cluster-trace-gpu-v2023 carries no
licence file, so railyard does not redistribute it: this script writes the slice to
`benchmarks/results/traces/openb-2023.csv` (not in git) from a clone of alibaba/clusterdata,
and only its index entry (`"shipped": false`) lives in `src/railyard/data/traces/traces.json`;
`compare_policies.py` runs it where the file has been made and says so where not.

The sample is small: 7,662 GPU-hours in 34 days, an offered load of 1.16 on a single 8-GPU
node; it is compared on two nodes with its inter-arrival gaps scaled to an
offered load of 1.0 (`rescale_to_load`, read by `compare_policies.py`: `simulate --load`).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
from pathlib import Path

INDEX_DIR = Path(__file__).parent.parent / "src" / "railyard" / "data" / "traces"
OUT = Path(__file__).parent / "results" / "traces"  # made here, never committed
MIRROR = "/work/.mirror/alibaba+clusterdata/repo"
PATH = "cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv"
NAME = "openb-2023"
FIRST_S = 9_900_000  # creation time from which the trace is dense (day 114.6 of 149.3)
LOAD = 1.0
NODES = 2  # one node would leave an 8-GPU task nowhere to go but the whole cluster
WHOLE_GPU_MILLI = 1000


def _kept(rows: list[dict[str, str]]) -> list[tuple[int, int, int]]:
    """(submit_s, gpus, runtime_s) of the tasks kept, by submit time."""
    trace_end_s = max(int(r["deletion_time"]) for r in rows)
    out = []
    for r in rows:
        gpus = int(r["num_gpu"])
        whole = gpus > 1 or (gpus == 1 and int(r["gpu_milli"]) == WHOLE_GPU_MILLI)
        if not whole or not r["scheduled_time"]:
            continue
        created, started, ended = (
            int(r[k]) for k in ("creation_time", "scheduled_time", "deletion_time")
        )
        if created < FIRST_S or ended >= trace_end_s or ended <= started:
            continue
        out.append((created, gpus, ended - started))
    return sorted(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusterdata", default=MIRROR, help="alibaba/clusterdata's git directory")
    ap.add_argument("--commit", default="HEAD")
    args = ap.parse_args()
    git = ["git", "-C", args.clusterdata]
    commit = subprocess.run(
        [*git, "rev-parse", args.commit], check=True, capture_output=True, text=True
    ).stdout.strip()
    text = subprocess.run(
        [*git, "show", f"{commit}:{PATH}"], check=True, capture_output=True, text=True
    ).stdout
    jobs = _kept(list(csv.DictReader(io.StringIO(text))))
    t0 = jobs[0][0]
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / f"{NAME}.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(("id", "submit_s", "gpus", "runtime_s", "user"))
        for i, (submit_s, gpus, runtime_s) in enumerate(jobs):
            w.writerow((i, submit_s - t0, gpus, runtime_s, f"task{i}"))
    span_s = jobs[-1][0] - t0
    gpu_s = sum(g * r for _, g, r in jobs)
    nodes = NODES
    entry = {
        "name": NAME,
        "set": "held-out",
        "source": f"github.com/alibaba/clusterdata@{commit} {PATH} (Weng et al., ATC '23): "
        f"whole-GPU tasks that ran and ended, created from {FIRST_S} s on",
        "licence": "Alibaba Cluster Trace Program: free for research or study "
        "(github.com/alibaba/clusterdata README; no licence file in cluster-trace-gpu-v2023)",
        "jobs": len(jobs),
        "gpu_hours": round(gpu_s / 3600, 1),
        "span_days": round(span_s / 86400, 1),
        "widest_gpus": max(g for _, g, _ in jobs),
        "nodes": nodes,
        "gpus_per_node": 8,
        "offered_load": LOAD,
        "offered_load_as_observed": round(gpu_s / span_s / (nodes * 8), 3),
        "rescale_to_load": LOAD,
        "shipped": False,
        "make": "python benchmarks/convert_openb_trace.py --clusterdata GIT_DIR",
    }
    index_path = INDEX_DIR / "traces.json"
    index = [t for t in json.loads(index_path.read_text()) if t["name"] != NAME]
    index_path.write_text(json.dumps([*index, entry], indent=1) + "\n")
    print(entry)


if __name__ == "__main__":
    main()
