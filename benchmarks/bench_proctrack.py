"""What a job step's cgroups cost: making them (tracking group plus a devices group with its
deny lines) at each start, and ending a step that holds N processes at each end.

``sudo .venv/bin/python benchmarks/bench_proctrack.py [--procs 1,20,200] [--repeat 10]``;
needs root. Runs every kind this machine has (cgroup v2 ``cgroup.kill``, the v1 freezer)
under parents of its own, removed afterwards; prints a table and writes
``benchmarks/results/bench_proctrack.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import time
from pathlib import Path

from railyard.exec.cgroups import devices, proctrack
from railyard.exec.cgroups.proctrack import Tracking

RESULTS = Path(__file__).parent / "results" / "bench_proctrack.json"


def kinds() -> list[tuple[str, Path]]:
    found = [
        ("cgroup2", r) for r in proctrack.V2_CANDIDATES if (r / "cgroup.controllers").is_file()
    ]
    if (proctrack.FREEZER / "cgroup.procs").is_file():
        found.append(("freezer", proctrack.FREEZER))
    return found


def fill(group: Path, count: int) -> None:
    """``count`` sleeping processes inside ``group`` (each detached in its own session)."""
    procs = group / "cgroup.procs"
    for _ in range(count):
        subprocess.Popen(
            ["sleep", "1000"],
            preexec_fn=lambda: procs.write_text(str(os.getpid())),
            start_new_session=True,
        )
    while len(proctrack.procs(group)) < count:
        time.sleep(0.01)


def row(kind: str, what: str, procs: int, samples: list[float]) -> dict[str, object]:
    p50_ms, max_ms = statistics.median(samples) * 1e3, max(samples) * 1e3
    return {"kind": kind, "what": what, "procs": procs, "p50_ms": p50_ms, "max_ms": max_ms}


def measure(kind: str, root: Path, counts: list[int], repeat: int) -> list[dict[str, object]]:
    parent = root / f"railyard-bench-{secrets.token_hex(4)}"
    parent.mkdir()
    dev = devices.Confinement(devices.DEVICES / parent.name)
    if devices.choose().parent is not None:
        dev.parent.mkdir()  # type: ignore[union-attr]
    tracking = Tracking(kind, parent)
    rows: list[dict[str, object]] = []
    try:
        made = []
        for i in range(repeat):
            start = time.perf_counter()
            tracking.make(f"s{i}")
            if dev.parent is not None and dev.parent.exists():
                dev.make(f"s{i}", [0])
            made.append(time.perf_counter() - start)
            tracking.end(f"s{i}")
            dev.remove(f"s{i}")
        rows.append(row(kind, "make step (+devices)", 0, made))
        for count in counts:
            took = []
            for i in range(repeat):
                group = tracking.make(f"k{i}")
                assert group is not None
                fill(group, count)
                start = time.perf_counter()
                assert tracking.end(f"k{i}")
                took.append(time.perf_counter() - start)
            rows.append(row(kind, "end step", count, took))
    finally:
        for child in parent.iterdir():
            if child.is_dir():
                tracking.end(child.name)
        parent.rmdir()
        if dev.parent is not None and dev.parent.exists():
            dev.parent.rmdir()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--procs", default="1,20,200")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    counts = [int(c) for c in args.procs.split(",")]
    rows = [r for kind, root in kinds() for r in measure(kind, root, counts, args.repeat)]
    print(f"{'kind':8} {'what':22} {'procs':>5} {'p50 ms':>8} {'max ms':>8}")
    for r in rows:
        print(
            f"{r['kind']:8} {r['what']:22} {r['procs']:>5} {r['p50_ms']:>8.2f} {r['max_ms']:>8.2f}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "proctrack", "rows": rows}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
