"""The scheduler's knobs as `up` and `simulate` take them, so both spell them alike: LAS's
quantum, service levels, what it ranks by and how long a starved job runs unsliced; the
victim-search budgets; greedy backfill's hold; the starvation limit (every policy)."""

from __future__ import annotations

import math
from typing import Any

from railyard.client.values import parse_walltime

HELP = {
    "quantum": "las: seconds a job runs before it may be sliced (default 600)",
    "service_levels": "las: service thresholds in GPU-hours (default 1,2,4,...,512)",
    "time_slice_by": "las: rank by 'remaining' GPU-hours of the time limit (default) "
    "or by 'attained' service (Tiresias)",
    "starved_unsliced": "las: how long a job that started after starving runs before it "
    "may be sliced, or 'none' to its end (default none)",
    "unsliced_after": "las: a job that has run this long in all is not sliced again, or "
    "'none' (default none)",
    "slice_level_gap": "las: a job slices only jobs at least this many service levels above "
    "its own (default 3; 1: any higher level)",
    "unsliced_after_restarts": "las: a job restarted this many times (sliced, preempted, "
    "requeued) is not sliced again, or 'none' (default none)",
    "starving_slices": "las: a job waiting past the starvation limit slices any job, "
    "whatever its level (default on)",
    "victim_searches": "preemption: victim searches per cycle (default 16)",
    "victim_searches_per_queue": "preemption: victim searches per queue and cycle "
    "(default 1; las 16)",
    "greedy_hold": "backfill none: hold GPUs for a job blocked this long, or 'none' "
    "(default 1-00:00:00; las 6:00:00)",
    "starvation_limit": "every policy: a job that has waited this long goes ahead of every "
    "queue (under las it runs to its end), or 'none' (default 7-00:00:00)",
}


def tuning(
    *,
    quantum: float | None = None,
    service_levels: str | None = None,
    victim_searches: int | None = None,
    victim_searches_per_queue: int | None = None,
    greedy_hold: str | None = None,
    time_slice_by: str | None = None,
    starved_unsliced: str | None = None,
    unsliced_after: str | None = None,
    slice_level_gap: int | None = None,
    unsliced_after_restarts: str | None = None,
    starving_slices: bool | None = None,
    starvation_limit: str | None = None,
) -> dict[str, Any]:
    """`SchedulerConfig` fields for the options given; ValueError names the option."""
    out: dict[str, Any] = {}
    if quantum is not None:
        if not 0 <= quantum < float("inf"):
            raise ValueError("--quantum: must be >= 0 seconds")
        out["time_slice_quantum_s"] = quantum
    if service_levels is not None:
        try:
            hours = [float(h) for h in service_levels.split(",") if h.strip()]
        except ValueError:
            raise ValueError(
                f"--service-levels: {service_levels!r} is not GPU-hours (hint: e.g. 1,24)"
            ) from None
        if not hours or any(not 0 < h < float("inf") for h in hours) or hours != sorted(hours):
            raise ValueError(
                "--service-levels: give increasing positive GPU-hours (hint: e.g. 0.5,4,32)"
            )
        out["service_levels_gpu_s"] = tuple(h * 3600.0 for h in hours)
    for name, value, field in (
        ("--victim-searches", victim_searches, "preemption_searches_per_cycle"),
        ("--victim-searches-per-queue", victim_searches_per_queue, "preemption_searches_per_queue"),
    ):
        if value is not None:
            if not 1 <= value <= 100_000:
                raise ValueError(f"{name}: must be between 1 and 100000")
            out[field] = value
    if time_slice_by is not None:
        from railyard.sched.config import TIME_SLICE_BY  # the scheduler only when asked

        if time_slice_by not in TIME_SLICE_BY:
            raise ValueError(
                f"--time-slice-by: {time_slice_by!r} is unknown (hint: one of "
                f"{', '.join(TIME_SLICE_BY)})"
            )
        out["time_slice_by"] = time_slice_by
    if starved_unsliced is not None:
        out["starved_unsliced_s"] = _duration_or_none("--starved-unsliced", starved_unsliced)
    if unsliced_after is not None:
        out["unsliced_after_s"] = _duration_or_none("--unsliced-after", unsliced_after)
    if slice_level_gap is not None:
        if not 1 <= slice_level_gap <= 1_000:
            raise ValueError(
                "--slice-level-gap: must be between 1 and 1000 (hint: 1 slices any higher level)"
            )
        out["slice_level_gap"] = slice_level_gap
    if unsliced_after_restarts is not None:
        out["unsliced_after_restarts"] = _count_or_none(
            "--unsliced-after-restarts", unsliced_after_restarts
        )
    if starving_slices is not None:
        out["starving_slices"] = starving_slices
    if greedy_hold is not None:
        out["greedy_hold_after_s"] = _duration_or_none("--greedy-hold", greedy_hold)
    if starvation_limit is not None:
        limit_s = _duration_or_none("--starvation-limit", starvation_limit)
        if limit_s == 0.0:
            raise ValueError(
                "--starvation-limit: must be longer than 0 (hint: e.g. 5-00:00:00, or none)"
            )
        out["starvation_limit_s"] = math.inf if limit_s is None else limit_s
    return out


def _count_or_none(option: str, text: str) -> int | None:
    if text.strip().lower() == "none":
        return None
    try:
        count = int(text)
    except ValueError:
        count = -1
    if not 0 <= count <= 1_000_000:
        raise ValueError(f"{option}: {text!r} is not a count of restarts (hint: e.g. 6, or none)")
    return count


def _duration_or_none(option: str, text: str) -> float | None:
    if text.strip().lower() == "none":
        return None
    try:
        return parse_walltime(text) or 0.0
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None
