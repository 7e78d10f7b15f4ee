"""``railyard stats JOB``: what a job's GPUs and processes used while it ran, like Slurm's
``sstat`` (AveCPU, MaxRSS) with the GPU figures ``nvidia-smi`` shows.

The server reads each running job every ``--sample-interval`` seconds and keeps the readings
for ``--sample-retention``; this prints the last, mean and highest of each figure: the job's
mean GPU utilisation, its GPUs' memory and power summed, its hottest GPU, its processes' CPU
(100% = one core) and resident memory, then each GPU's utilisation. ``--csv`` gives the whole
history (at most ``--points`` buckets, each the mean of the readings in it), for a spreadsheet
or a plot; ``--json`` the server's answer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from railyard.cli.args import Command, Parser, connect, emit_json, json_flag
from railyard.cli.text import table
from railyard.client.bounds import MAX_SAMPLE_POINTS, SAMPLE_ROW_BUDGET
from railyard.client.samplecsv import csv_text

if TYPE_CHECKING:
    from railyard.client.wire import SamplePoint


def _bytes(v: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= size:
            return f"{v / size:,.1f} {unit}"
    return f"{v:,.0f} B"


FIGURES: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("GPU utilisation (mean)", "gpu_util_pct", lambda v: f"{v:.1f}%"),
    ("GPU memory used", "gpu_mem_used_bytes", _bytes),
    ("GPU power", "gpu_power_w", lambda v: f"{v:,.0f} W"),
    ("GPU temperature (max)", "gpu_temp_c_max", lambda v: f"{v:.0f} C"),
    ("CPU (100% = 1 core)", "cpu_pct", lambda v: f"{v:.1f}%"),
    ("memory (resident)", "host_mem_bytes", _bytes),
)


def _line(name: str, values: Sequence[float], fmt: Callable[[float], str]) -> list[str]:
    return [name, fmt(values[-1]), fmt(sum(values) / len(values)), fmt(max(values))]


def _rows(points: Sequence[SamplePoint], gpus: Sequence[str]) -> list[list[str]]:
    rows = []
    for name, key, fmt in FIGURES:
        values = [float(v) for p in points if (v := p[key]) is not None]  # type: ignore[literal-required]
        if values:
            rows.append(_line(name, values, fmt))
    for gpu in gpus:
        util = [p["gpus"][gpu] for p in points if gpu in p["gpus"]]
        if util:
            rows.append(_line(f"GPU {gpu} utilisation", util, lambda v: f"{v:.1f}%"))
    return rows


def stats(args: argparse.Namespace) -> None:
    """What a running or recent job's GPUs and processes used, like sstat."""
    with connect() as client:
        found = client.samples(args.job_id, points=args.points)
    if args.json:
        emit_json(found)
        return
    if args.csv:
        sys.stdout.write(csv_text(found["points"], found["gpus"]))
        return
    points = found["points"]
    if not points:
        print(f"job {args.job_id}: no readings (a job is read while it runs, every "
              "`railyard up --sample-interval` seconds)")  # fmt: skip
        return
    span_s = points[-1]["t_s"] - points[0]["t_s"] + found["bucket_s"]
    merged = (f", shown as {len(points)} means of {found['bucket_s']:g} s"
              if found["readings"] > len(points) else "")  # fmt: skip
    print(f"job {found['job_id']}: {found['readings']} readings over {span_s:,.0f} s{merged}")
    if found["partial"]:
        print(f"(its newest readings only: one request reads at most {SAMPLE_ROW_BUDGET:,} rows)")
    print(table(["FIGURE", "LAST", "MEAN", "MAX"], _rows(points, found["gpus"]),
                right=("LAST", "MEAN", "MAX")))  # fmt: skip


def _points(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_SAMPLE_POINTS:
        raise argparse.ArgumentTypeError(f"must be in 1..{MAX_SAMPLE_POINTS}")
    return value


def _stats_args(p: Parser) -> None:
    p.add_argument("job_id", metavar="JOB", help="a job id (an array task: 12_3)")
    most = "at most this many readings, each the mean of its interval (default 300)"
    p.add_argument("--points", type=_points, default=300, help=most)
    p.add_argument("--csv", action="store_true", help="the whole history, comma-separated")
    json_flag(p)


COMMANDS = (Command("stats", stats, _stats_args),)
