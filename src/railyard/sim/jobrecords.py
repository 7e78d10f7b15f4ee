"""Per-job records of a run (`simulate --jobs-out FILE`) and the steady-state window
(`--measure-jobs K:L`), for researchers who compute their own statistics.

The window follows Gavel (`--window-start`/`--window-end`): jobs are numbered 0, 1, ... in
arrival order (submit time, then id: the `Workload` order), and only those with a number in
[K, L) are measured, so the warm-up (an empty cluster filling) and the drain (the last jobs
alone on it) do not weigh in. Every job still runs; utilization, goodput and fairness stay
the whole run's.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from railyard.sim.records import JobRecord

COLUMNS = (
    "policy", "seed", "index", "id", "user", "queue", "gpus", "state", "submit_s", "start_s",
    "end_s", "jct_s", "wait_s", "preemptions", "restarts", "failures", "lost_gpu_s", "measured",
)  # fmt: skip
"""`index`: arrival order from 0; `start_s`: the first start; `wait_s` = start_s - submit_s;
`jct_s` = end_s - submit_s (empty for a job that never ran or never ended); `lost_gpu_s`:
GPU-seconds of work its evictions and failures threw away (work since its last checkpoint);
`measured`: inside the `--measure-jobs` window (every job when there is none)."""


def parse_window(text: str) -> tuple[int, int]:
    """ "K:L" -> (K, L): jobs K..L-1 in arrival order. Raises ValueError with a hint."""
    first, sep, end = text.partition(":")
    try:
        k, n = int(first), int(end)
    except ValueError:
        k, n = -1, -1
    if not sep or k < 0 or n <= k:
        raise ValueError(
            f"--measure-jobs: {text!r} is not K:L with 0 <= K < L "
            "(hint: e.g. 1000:2000 measures the 1,000 jobs from the 1,000th to arrive, as Gavel)"
        )
    return k, n


def window(records: Sequence[JobRecord], measure: tuple[int, int] | None) -> list[JobRecord]:
    """The records measured: those in [K, L) of arrival order (all when `measure` is None)."""
    if measure is None:
        return list(records)
    return list(records[measure[0] : measure[1]])


def rows(records: Sequence[JobRecord], measure: tuple[int, int] | None) -> list[dict[str, Any]]:
    """One plain dict per job, in arrival order, with `COLUMNS` less policy and seed."""
    lo, hi = measure if measure is not None else (0, len(records))
    out: list[dict[str, Any]] = []
    for index, r in enumerate(records):
        t = r.trace
        start, end = r.first_start_t_s, r.end_t_s
        ran = start is not None and end is not None
        out.append(
            {
                "index": index,
                "id": t.id,
                "user": t.user,
                "queue": t.queue,
                "gpus": r.gpus,
                "state": r.state,
                "submit_s": t.submit_s,
                "start_s": start,
                "end_s": end,
                "jct_s": end - t.submit_s if ran and end is not None else None,
                "wait_s": start - t.submit_s if start is not None else None,
                "preemptions": r.preemptions,
                "restarts": r.restarts,
                "failures": r.failures,
                "lost_gpu_s": r.lost_gpu_s,
                "measured": lo <= index < hi,
            }
        )
    return out


def write_csv(path: Path, runs: Iterable[Mapping[str, Any]]) -> int:
    """Write every run's `job_records` to `path` as one CSV (a row per job per run, the run's
    policy and seed first); return the rows written."""
    written = 0
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(COLUMNS)
        for run in runs:
            for row in run.get("job_records") or ():
                values = {"policy": run["policy"], "seed": run["seed"], **row}
                out.writerow(["" if values[c] is None else values[c] for c in COLUMNS])
                written += 1
    return written
