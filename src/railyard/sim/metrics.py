"""Metrics of a run: what owners compare policies by, as a JSON-ready dict.

JCT is end minus submit; queueing delay is first start minus submit (later waits after a
requeue show in JCT). Size classes follow the usual trace-study split: 1, 2-8 (one node),
9-64, 65+ GPUs. Goodput is useful GPU-time (work that survived) over allocated GPU-time
(every attempt, including restarts, checkpoint writes and lost work).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from railyard.sim.jobrecords import window
from railyard.sim.records import JobRecord, RunLog

SIZE_CLASSES = (("1", 1, 1), ("2-8", 2, 8), ("9-64", 9, 64), ("65+", 65, math.inf))


def size_class(gpus: int) -> str:
    for name, lo, hi in SIZE_CLASSES:
        if lo <= gpus <= hi:
            return name
    return "65+"


def _stats(values: Iterable[float]) -> dict[str, float | int]:
    a = np.fromiter(values, dtype=float)
    if a.size == 0:
        return {"jobs": 0}
    return {
        "jobs": int(a.size),
        "mean_s": float(a.mean()),
        "median_s": float(np.median(a)),
        "p99_s": float(np.percentile(a, 99)),
    }


def _grouped(records: list[JobRecord], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[JobRecord]] = {}
    for r in records:
        k = size_class(r.gpus) if key == "size" else r.trace.queue
        groups.setdefault(k, []).append(r)
    order = [c[0] for c in SIZE_CLASSES] if key == "size" else sorted(groups)
    return {
        k: {
            "jct": _stats(_jct(groups[k])),
            "queueing": _stats(_wait(groups[k])),
        }
        for k in order
        if k in groups
    }


def _jct(records: Iterable[JobRecord]) -> Iterable[float]:
    """Of the jobs that ran and ended (one past its --deadline ended without running)."""
    return (
        r.end_t_s - r.trace.submit_s
        for r in records
        if r.end_t_s is not None and r.first_start_t_s is not None
    )


def _wait(records: Iterable[JobRecord]) -> Iterable[float]:
    return (r.first_start_t_s - r.trace.submit_s for r in records if r.first_start_t_s is not None)


def utilization_series(log: RunLog, bins: int = 100) -> dict[str, list[float]]:
    """Time-weighted busy-GPU fraction and mean pending jobs per bin (piecewise constant)."""
    tl = log.timeline
    if not tl or log.total_gpus == 0:
        return {"t_s": [], "utilization": [], "pending": []}
    t = np.array([x[0] for x in tl] + [log.end_t_s])
    busy = np.array([x[1] for x in tl], dtype=float)
    pend = np.array([x[2] for x in tl], dtype=float)
    end = max(float(t[-1]), 1e-9)
    edges = np.linspace(0.0, end, bins + 1)
    # cumulative integrals at the step points, then interpolated at the bin edges
    dt = np.diff(t)
    cum_busy = np.concatenate([[0.0], np.cumsum(busy * dt)])
    cum_pend = np.concatenate([[0.0], np.cumsum(pend * dt)])
    width = np.diff(edges)
    util = np.diff(np.interp(edges, t, cum_busy)) / width / log.total_gpus
    pending = np.diff(np.interp(edges, t, cum_pend)) / width
    mids = (edges[:-1] + edges[1:]) / 2
    return {"t_s": mids.tolist(), "utilization": util.tolist(), "pending": pending.tolist()}


def fairness(log: RunLog) -> dict[str, dict[str, float]]:
    """Each queue's share of GPU-time against its entitlement (its weight share)."""
    total = sum(log.queue_gpu_s.values())
    weights = {q: log.weights.get(q, 1.0) for q in log.queue_gpu_s}
    wsum = sum(weights.values()) or 1.0
    return {
        q: {
            "gpu_share": (log.queue_gpu_s[q] / total) if total else 0.0,
            "entitlement": weights[q] / wsum,
        }
        for q in sorted(log.queue_gpu_s)
    }


def summarize(
    log: RunLog, *, bins: int = 100, measure: tuple[int, int] | None = None
) -> dict[str, Any]:
    """The metrics of one run as plain JSON-able values. With `measure` (K, L) the job
    statistics are of jobs K..L-1 in arrival order only (`jobrecords.window`, as Gavel's
    steady-state window); utilization, goodput and fairness stay the whole run's."""
    everyone = list(log.records.values())
    recs = window(everyone, measure)
    finished = [r for r in recs if r.end_t_s is not None]
    states: dict[str, int] = {}
    for r in recs:
        states[r.state] = states.get(r.state, 0) + 1
    multi = [r for r in recs if r.multi_node_starts]
    starts = sum(r.multi_node_starts for r in multi)
    first_submit = min((r.trace.submit_s for r in everyone), default=0.0)
    ended = (r.end_t_s for r in everyone if r.end_t_s is not None)
    last_end = max(ended, default=first_submit)
    busy_gpu_s = sum(
        b * (t2 - t1)
        for (t1, b, _, _), (t2, *_) in zip(log.timeline, log.timeline[1:], strict=False)
    )
    makespan = last_end - first_submit
    return {
        "jobs": len(recs),
        "measured": None if measure is None else {"first": measure[0], "end": measure[1]},
        "states": dict(sorted(states.items())),
        "jct": _stats(_jct(recs)),
        "queueing": _stats(_wait(recs)),
        "by_size": _grouped(finished, "size"),
        "by_queue": _grouped(finished, "queue"),
        # a node's worth and more: the gangs time slicing and fragmentation hurt first
        "gangs_8_plus": {"jct": _stats(_jct(r for r in finished if r.gpus >= 8))},
        "makespan_s": makespan,
        "utilization": busy_gpu_s / (log.total_gpus * makespan) if makespan > 0 else 0.0,
        "goodput": log.useful_gpu_s / log.allocated_gpu_s if log.allocated_gpu_s else 1.0,
        "useful_gpu_h": log.useful_gpu_s / 3600,
        "allocated_gpu_h": log.allocated_gpu_s / 3600,
        "lost_gpu_h": log.lost_gpu_s / 3600,
        "preemptions": sum(r.preemptions for r in recs),
        "restarts": sum(r.restarts for r in recs),
        "node_failures": log.node_failures,
        "checkpoints": log.checkpoints,
        "fairness": fairness(log),
        "multi_node": {
            "starts": starts,
            "within_leaf_group": sum(r.one_leaf_group_starts for r in multi) / starts
            if starts
            else None,
            "within_scalable_unit": sum(r.one_su_starts for r in multi) / starts
            if starts
            else None,
        },
        "interactive": _interactive(recs),
        "images": _images(recs),
        "cycles": log.cycles,
        "events": log.events,
        "series": utilization_series(log, bins),
        "jct_cdf_s": _cdf(_jct(recs)),
    }


def _images(recs: list[JobRecord]) -> dict[str, Any] | None:
    """Jobs in containers (trace column ``image``): how many starts were cold, and what their
    pulls cost in time and in GPU time held; None when no job has an image."""
    jobs = [r for r in recs if r.trace.image is not None]
    if not jobs:
        return None
    cold = sum(r.cold_starts for r in jobs)
    return {
        "jobs": len(jobs),
        "cold_starts": cold,
        "pull_s_mean": sum(r.pull_s for r in jobs) / cold if cold else 0.0,  # per cold start
        "pull_gpu_h": sum(r.pull_s * r.gpus for r in jobs) / 3600,
    }


def _interactive(recs: list[JobRecord]) -> dict[str, Any] | None:
    """Sessions (trace column ``interactive``): how long they waited, how many an idle limit
    ended, and the GPU-hours they held; None when the workload has none."""
    sessions = [r for r in recs if r.trace.interactive]
    if not sessions:
        return None
    return {
        "jobs": len(sessions),
        "idle_stopped": sum(r.idle_stopped for r in sessions),
        "queueing": _stats(_wait(sessions)),
        "held_gpu_h": sum(
            r.gpus * (r.end_t_s - r.first_start_t_s)
            for r in sessions
            if r.end_t_s is not None and r.first_start_t_s is not None
        )
        / 3600,
    }


def _cdf(values: Iterable[float], points: int = 50) -> list[float]:
    """JCT quantiles at `points` evenly spaced probabilities (for plots)."""
    a = np.fromiter(values, dtype=float)
    if a.size == 0:
        return []
    out: list[float] = np.quantile(a, np.linspace(0, 1, points)).tolist()
    return out
