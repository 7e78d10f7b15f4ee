"""CPU instructions of one scheduling cycle, counted by Valgrind's callgrind.

    python benchmarks/bench_sched_instructions.py [--gpus 2048|16384|100352] [--first]
        [--against DIR]

A shared 2-core machine's clock varies by up to 2x between runs of the same code; the number
of instructions a cycle executes does not. Each policy of `bench_sched.py`'s scenario runs in
a child process under callgrind with counting off; the child builds the state (with a fixed
hash seed, so every run builds the same one), runs two cycles to warm its caches, and counts
the third, with the garbage collector paused (a full collection lands in one counted cycle
and not in another, and would swamp what changed; `bench_sched.py`'s times include it).
`--against DIR` counts the `src` of another checkout too (a `git worktree` of an earlier
commit), in the same minutes, and prints the ratio. Needs Debian's `valgrind`.

`--first` counts the first cycle after a start too (a fresh cache; the child dumps its count
apart). At `--gpus 100352` (issue 56) it writes bench_sched_instructions_huge.json.

Prints a table and writes benchmarks/results/bench_sched_instructions.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from railyard.sched.config import TIME_SLICING_DEFAULTS, SchedulerConfig

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "bench_sched_instructions.json"
TIME_SLICED = 'SchedulerConfig(ordering="las", backfill="none", preemption="las", {})'
# the last round's time slicing: thresholds 1 and 24 GPU-hours, one search per queue, no hold
LAS_R2 = {"greedy_hold_after_s": None, "service_levels_gpu_s": (3600.0, 86_400.0)}
# the round before this one: attained service on 1, 8 and 64 GPU-hours, 16 searches a queue
LAS_R3 = {
    "greedy_hold_after_s": 6 * 3600.0,
    "preemption_searches_per_queue": 16,
    "service_levels_gpu_s": (3600.0, 8 * 3600.0, 64 * 3600.0),
}


def _knobs(knobs: dict[str, object]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in sorted(knobs.items()))


def _las_now() -> str:
    """Time slicing at this checkout's defaults (`SchedulerConfig.of`), spelled out as plain
    fields, so that an older checkout given to --against runs the same knobs."""
    las = SchedulerConfig.of(ordering="las", backfill="none", preemption="las")
    return TIME_SLICED.format(
        _knobs(
            {name: getattr(las, name) for name in (*TIME_SLICING_DEFAULTS, "service_levels_gpu_s")}
        )
    )


POLICIES = {
    "default": "SchedulerConfig()",
    "fifo": 'SchedulerConfig(ordering="fifo", backfill="none", preemption="off")',
    "conservative": 'SchedulerConfig(backfill="conservative")',
    "las": _las_now(),
    "las-r2": TIME_SLICED.format(_knobs(LAS_R2)),
    "las-r3": TIME_SLICED.format(_knobs(LAS_R3)),
}
CHILD = """
import gc, os, subprocess, sys
sys.path.insert(0, {bench!r})
from bench_sched import scenario_state
from railyard.sched import CycleCache, SchedulerConfig, cycle
state = scenario_state(seed=7, n_pending=10_000, now_t_s=1e6, scale={scale})
config, cache = {config}, CycleCache()
gc.collect()
gc.disable()
def counted(on):
    subprocess.run(["callgrind_control", "-i", on, str(os.getpid())], capture_output=True)
if {first}:  # the first cycle after a start: a fresh cache, counted and dumped apart
    counted("on")
    cycle(state, 1e6, config, cache)
    counted("off")
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True)
else:
    cycle(state, 1e6, config, cache)
cycle(state, 1e6, config, cache)
counted("on")
cycle(state, 1e6, config, cache)
counted("off")
"""


def count(src: Path, policy: str, scale: int, first: bool = False) -> dict[str, int]:
    """Instructions of one warm cycle of `policy` with `src` first on the import path, and
    with `first` of the first cycle after a start (a fresh cache) too."""
    code = CHILD.format(bench=str(HERE), scale=scale, config=POLICIES[policy], first=first)
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={tmp}/callgrind.out", sys.executable, "-c", code],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        found = re.search(r"Collected : (\d+)", out.stderr)
        if found is None:
            raise RuntimeError(f"callgrind printed no count:\n{out.stderr[-2000:]}")
        total = int(found.group(1))
        if not first:
            return {"warm": total}
        dumped = [p for p in Path(tmp).iterdir() if p.name != "callgrind.out"]
        totals = re.search(r"^totals: (\d+)", dumped[0].read_text(), re.MULTILINE)
        if len(dumped) != 1 or totals is None:
            raise RuntimeError(f"callgrind dumped no first cycle: {dumped}")
        return {"first": int(totals.group(1)), "warm": total - int(totals.group(1))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, choices=(2048, 16384, 100_352), default=2048)
    parser.add_argument("--first", action="store_true", help="count the first cycle too")
    parser.add_argument("--against", type=Path, help="another checkout to count as 'before'")
    parser.add_argument("--only", nargs="+", choices=list(POLICIES), help="these policies")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_sched_instructions: valgrind is not installed (apt-get install valgrind)")
    scale = args.gpus // 2048
    mine = HERE.parent / "src"
    rows = {}
    for policy in args.only or POLICIES:
        now = count(mine, policy, scale, args.first)
        row: dict[str, float] = {"instructions": now["warm"]}
        if args.first:
            row["first"] = now["first"]
        if args.against is not None:
            before = count(args.against / "src", policy, scale, args.first)
            row["before"] = before["warm"]
            row["ratio"] = row["instructions"] / row["before"]
            if args.first:
                row["first_before"] = before["first"]
        rows[policy] = row
    report = {"gpus": args.gpus, "pending": 10_000, "running": 1_500 * scale, "by_policy": rows}
    path = RESULTS if args.gpus != 100_352 else RESULTS.with_name(f"{RESULTS.stem}_huge.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")

    table = Table(title=f"instructions of one cycle, {args.gpus:,} GPUs, 10,000 pending")
    cols = ["policy", "before (M)", "now (M)", "ratio"]
    if args.first:
        cols += ["first before (M)", "first now (M)"]
    for col in cols:
        table.add_column(col, justify="left" if col == "policy" else "right")
    for policy, row in rows.items():
        before = f"{row['before'] / 1e6:,.1f}" if "before" in row else "-"
        ratio = f"{row['ratio']:.3f}" if "ratio" in row else "-"
        cells = [policy, before, f"{row['instructions'] / 1e6:,.1f}", ratio]
        if args.first:
            first_before = row.get("first_before")
            cells += [
                "-" if first_before is None else f"{first_before / 1e6:,.1f}",
                f"{row['first'] / 1e6:,.1f}",
            ]
        table.add_row(*cells)
    Console(width=100).print(table)
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    print(f"wrote {shown}")


if __name__ == "__main__":
    main()
