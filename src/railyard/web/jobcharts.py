"""The job page's resource graphs: the job's GPU utilisation, memory and power and its
processes' CPU and memory over its run (`control.usecases.jobsamples`), as the Ray dashboard
and Determined draw them, with the history as CSV."""

from __future__ import annotations

import time
from collections.abc import Callable

from railyard.control.usecases.jobsamples import ROW_BUDGET, History
from railyard.web.figures import chart
from railyard.web.page import esc

POINTS = 120  # one graph's width in buckets (about 3 px each)
WINDOW_S = 6 * 3600.0  # the last six hours of its readings (the CSV has them all)
GIB = 2**30


def _clock(t_s: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t_s))


def _gib(v: float) -> str:
    if v < 1:
        return f"{v * 1024:,.0f} MiB"
    return f"{v:,.1f} GiB" if v < 100 else f"{v:,.0f} GiB"


GRAPHS: tuple[tuple[str, str, float, Callable[[float], str]], ...] = (
    ("GPU utilisation (mean of its GPUs)", "gpu_util_pct", 1.0, lambda v: f"{v:.0f}%"),
    ("GPU memory used (its GPUs)", "gpu_mem_used_bytes", GIB, _gib),
    ("GPU power (its GPUs)", "gpu_power_w", 1.0, lambda v: f"{v:,.0f} W"),
    ("CPU (100% = one core)", "cpu_pct", 1.0, lambda v: f"{v:.0f}%"),
    ("memory of its processes (resident)", "host_mem_bytes", GIB, _gib),
)


def render(found: History) -> str:
    """The graphs with data; a line saying why there are none otherwise."""
    job = esc(found.job_id)
    if not found.buckets:
        return (
            "<p class=muted>No readings yet: a job's GPUs and processes are read while it "
            "runs (every <code>railyard up --sample-interval</code> seconds) and kept for "
            "<code>--sample-retention</code>.</p>"
        )
    first, last = found.buckets[0].t_s, found.buckets[-1].t_s + found.bucket_s
    labels = [_clock(first), _clock((first + last) / 2), _clock(last)]
    figures = []
    for title, key, scale, unit in GRAPHS:
        values = [getattr(b, key) for b in found.buckets]
        if all(v is None for v in values):
            continue
        scaled = [0.0 if v is None else v / scale for v in values]
        figures.append(chart(scaled, label=title, x_labels=labels, unit=unit, latest="last"))
    merged = (f", drawn as {len(found.buckets)} means of {found.bucket_s:g} s"
              if found.readings > len(found.buckets) else "")  # fmt: skip
    if found.partial:
        merged += f" (its newest: a page reads at most {ROW_BUDGET:,} rows)"
    note = (f"<p class=muted>{found.readings} readings{merged}. "
            f'<a href="/ui/jobs/{job}/samples.csv">Download as CSV</a></p>')  # fmt: skip
    return '<div class="charts">' + "".join(figures) + "</div>" + note
