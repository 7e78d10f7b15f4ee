"""Time the training-step model and the parallelism search on the real network model.

Run: ``python benchmarks/bench_train.py [--repeat N]``. Prints a table and writes
``benchmarks/results/bench_train.json``. Times are wall-clock medians of N runs in one process
(``time.perf_counter``) after one warm-up run, which also fills the collective model's cache of
solved flows (the search calls the same few collectives again and again). The target is under
10 ms per ``estimate_step``. Communication comes from
``railyard.twin.collective.CollectiveModel`` on the ``rail-2048`` preset (2,048 H100).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import time_runs

from railyard.blueprint import load
from railyard.twin.collective import CollectiveModel
from railyard.twin.models import PRESETS, Parallelism
from railyard.twin.search import best_parallelism
from railyard.twin.train import estimate_step

RESULTS = Path(__file__).parent / "results" / "bench_train.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    blueprint = load("rail-2048").blueprint
    h100 = blueprint.gpu_spec("H100-SXM-80GB")
    comm = CollectiveModel(blueprint)
    llama70 = PRESETS["llama3-70b"]
    split = Parallelism(
        tp=8, pp=4, dp=32, micro_batch=1, global_batch=1024, interleave=5,
        recompute="selective", sequence_parallel=True, distributed_optimizer=True,
        overlap_tp_comm=True,
    )  # fmt: skip
    cases: dict[str, Callable[[], object]] = {
        "estimate_step llama3-70b 1,024 H100": lambda: estimate_step(llama70, split, h100, 8, comm),
        "estimate_step gpt3-175b 1,024 H100": lambda: estimate_step(
            PRESETS["gpt3-175b"],
            Parallelism(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536, recompute="full"),
            h100,
            8,
            comm,
        ),
        "best_parallelism llama3-8b 64 H100": lambda: best_parallelism(
            PRESETS["llama3-8b"], 64, h100, 8, comm, 512, 8192
        ),
        "best_parallelism llama3-70b 1,024 H100": lambda: best_parallelism(
            llama70, 1024, h100, 8, comm, 1024, 8192
        ),
    }
    results: dict[str, object] = {"comm": "CollectiveModel on rail-2048"}
    print(f"{'case':42s} {'median ms':>10s} {'min ms':>8s}")
    for name, fn in cases.items():
        samples = time_runs(fn, args.repeat)
        med, low = statistics.median(samples) * 1e3, min(samples) * 1e3
        results[name] = {"median_ms": med, "min_ms": low, "repeat": args.repeat}
        print(f"{name:42s} {med:10.3f} {low:8.3f}")

    best = best_parallelism(llama70, 1024, h100, 8, comm, 1024, 8192)
    print("\nbest splits, llama3-70b on 1,024 H100 of rail-2048:")
    for est in best:
        p = est.parallel
        print(
            f"  TP{p.tp} PP{p.pp} DP{p.dp} mb{p.micro_batch} v{p.interleave} {p.recompute:9s} "
            f"step {est.step_time_s:6.2f} s  MFU {est.mfu:5.1%}  "
            f"{est.memory.needed_bytes / 1e9:5.1f} GB"
        )

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
