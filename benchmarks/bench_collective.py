"""Full nccl-tests sweeps from the collective model; the issue's targets are 25 sizes x 5
collectives on 2,048 GPUs (rail-2048 preset, all 256 nodes) in under 1 s and on 16,384 GPUs
(2,048 HGX H100 nodes, rail-optimized, 3 tiers of QM9700) in under 10 s on a 2-core machine.

Run: ``python benchmarks/bench_collective.py [--repeat N]``. Prints a table and writes
``benchmarks/results/bench_collective.json``. Each timing builds a fresh model from an already
built fabric (routes, flows and max-min solves included, fabric construction excluded and
reported separately); times are wall-clock medians of N runs (``time.perf_counter``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import rail_optimized

from railyard.blueprint import Blueprint, load
from railyard.fabric.build import build_fabric
from railyard.fabric.model import Fabric
from railyard.twin.collective import CollectiveModel, SweepRow

RESULTS = Path(__file__).parent / "results" / "bench_collective.json"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast")
MIN_BYTES, MAX_BYTES, FACTOR = 256, 4 << 30, 2  # 25 sizes, 256 B .. 4 GiB


def sweep_all(bp: Blueprint, fabric: Fabric) -> dict[str, list[SweepRow]]:
    """Every collective over every node of the cluster, all 8 GPUs per node."""
    model = CollectiveModel(bp, fabric)
    nodes = len(fabric.nodes)
    return {op: model.sweep(op, MIN_BYTES, MAX_BYTES, FACTOR, nodes, 8) for op in OPS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cases = {
        "rail-2048 (2,048 GPUs)": (load("rail-2048").blueprint, 1.0),
        "rail-optimized 16,384 GPUs (QM9700)": (rail_optimized(16384), 10.0),
    }
    out: dict[str, object] = {"sizes": 0, "collectives": list(OPS), "cases": {}}
    for name, (bp, target_s) in cases.items():
        start = time.perf_counter()
        fabric = build_fabric(bp)
        build_s = time.perf_counter() - start
        samples, rows = [], {}
        for _ in range(args.repeat):
            start = time.perf_counter()
            rows = sweep_all(bp, fabric)
            samples.append(time.perf_counter() - start)
        median = statistics.median(samples)
        out["sizes"] = len(rows["all_reduce"])
        print(f"\n{name}: sweep {median:.3f} s (target < {target_s:.0f} s), fabric {build_s:.3f} s")
        print(f"{'collective':<15}{'size (B)':>12}{'time (us)':>12}{'algbw':>9}{'busbw':>9}  algo")
        table = []
        for op, op_rows in rows.items():
            for row in op_rows[::6]:  # 256 B, 16 KiB, 1 MiB, 64 MiB, 4 GiB
                print(
                    f"{op:<15}{row.size_bytes:>12}{row.time_us:>12.1f}"
                    f"{row.algbw_gbyte_s:>9.2f}{row.busbw_gbyte_s:>9.2f}  "
                    f"{row.algo}/{row.protocol}"
                )
            table += [{"op": op, **row.__dict__} for row in op_rows]
        cases_out = out["cases"]
        assert isinstance(cases_out, dict)
        cases_out[name] = {
            "gpus": 8 * len(fabric.nodes),
            "sweep_s_median": median,
            "sweep_s_samples": samples,
            "fabric_build_s": build_s,
            "target_s": target_s,
            "meets_target": median < target_s,
            "rows": table,
        }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
