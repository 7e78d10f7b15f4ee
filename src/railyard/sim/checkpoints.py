"""Checkpointing on the virtual clock: when a job saves, and how much work a stop loses.

An attempt runs: restart overhead, then compute segments of `interval_s` each followed by a
checkpoint of `cost_s` (the job pauses while it writes), and no checkpoint after the last
segment. A failure loses the work since the last completed checkpoint; a preemption asks the
job to write one now and stop. The interval is fixed, or Young's / Daly's optimum from the
job's failure rate (`railyard.twin.checkpoint`, which cites both papers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from railyard.twin.checkpoint import (
    FAILURES_PER_GPU_HOUR,
    daly_interval_s,
    mtbf_s,
    young_interval_s,
)


class IntervalRule(StrEnum):
    NONE = "none"  # never checkpoints: every stop loses the whole attempt
    FIXED = "fixed"
    YOUNG = "young"
    DALY = "daly"


@dataclass(frozen=True)
class CheckpointPolicy:
    """How jobs checkpoint. `restart_s` is paid at the start of every attempt after the first
    (rescheduling, loading, reading the checkpoint back)."""

    rule: IntervalRule = IntervalRule.YOUNG
    interval_s: float = 3600.0
    cost_s: float = 60.0
    restart_s: float = 300.0
    per_gpu_hour: float = FAILURES_PER_GPU_HOUR

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.cost_s < 0 or self.restart_s < 0:
            raise ValueError("interval_s must be > 0; cost_s and restart_s >= 0")
        if self.per_gpu_hour < 0:
            raise ValueError("per_gpu_hour must be >= 0")

    def interval_for(self, gpus: int) -> float:
        """Compute seconds between checkpoints for a job of `gpus` GPUs (inf: never)."""
        if self.rule is IntervalRule.NONE:
            return math.inf
        if self.rule is IntervalRule.FIXED:
            return self.interval_s
        if self.per_gpu_hour == 0 or self.cost_s == 0:
            return math.inf if self.cost_s else self.interval_s
        mtbf = mtbf_s(gpus, self.per_gpu_hour)
        if self.rule is IntervalRule.YOUNG:
            return young_interval_s(self.cost_s, mtbf)
        return max(daly_interval_s(self.cost_s, mtbf), 1.0)


@dataclass(slots=True)
class Attempt:
    """One run of a job: starts at `start_t_s` with `work_s` left, checkpointing as above.

    `speed` is the fraction of full speed it computes at (a slow node in its placement runs
    the whole gang at that node's pace); work and intervals are in full-speed seconds,
    checkpoint writes (`cost_s`) take the same wall time at any speed."""

    start_t_s: float
    overhead_s: float
    work_s: float
    interval_s: float
    cost_s: float
    speed: float = 1.0

    @property
    def compute_start_t_s(self) -> float:
        return self.start_t_s + self.overhead_s

    @property
    def checkpoints(self) -> int:
        """Checkpoints written if it runs to the end (none after the last segment)."""
        if not math.isfinite(self.interval_s) or self.work_s <= 0:
            return 0
        return max(0, math.ceil(self.work_s / self.interval_s) - 1)

    @property
    def _segment_s(self) -> float:
        """Wall time of one interval's work."""
        return self.interval_s / self.speed

    @property
    def end_t_s(self) -> float:
        return self.compute_start_t_s + self.work_s / self.speed + self.checkpoints * self.cost_s

    def checkpoint_t_s(self, k: int) -> float:
        """Time the k-th checkpoint (1-based) completes."""
        return self.compute_start_t_s + k * (self._segment_s + self.cost_s)

    def saved_at(self, t_s: float) -> tuple[int, float]:
        """(checkpoints completed by `t_s`, work they saved)."""
        if not math.isfinite(self.interval_s):
            return 0, 0.0
        e = t_s - self.compute_start_t_s
        if e <= 0:
            return 0, 0.0
        k = min(int(e // (self._segment_s + self.cost_s)), self.checkpoints)
        return k, k * self.interval_s

    def progress_at(self, t_s: float) -> float:
        """Work done by `t_s`, saved or not."""
        e = t_s - self.compute_start_t_s
        if e <= 0:
            return 0.0
        if not math.isfinite(self.interval_s):
            return min(e * self.speed, self.work_s)
        period = self._segment_s + self.cost_s
        k = min(int(e // period), self.checkpoints)
        in_segment = min(self.interval_s, (e - k * period) * self.speed)
        return min(self.work_s, k * self.interval_s + in_segment)

    def stop_on_signal(self, t_s: float, grace_s: float) -> tuple[float, float] | None:
        """Asked at `t_s` to checkpoint and stop: (stop time, work saved) if it manages within
        the grace, else None (it is killed at the deadline and keeps its last checkpoint)."""
        if not math.isfinite(self.interval_s):
            return None  # a job that never checkpoints cannot save its work
        e = t_s - self.compute_start_t_s
        if e <= 0:
            return t_s, 0.0  # still loading: nothing new to save
        segment = self._segment_s
        period = segment + self.cost_s
        k = min(int(e // period), self.checkpoints)
        in_segment = e - k * period
        if in_segment <= segment:
            done = min(self.work_s, k * self.interval_s + in_segment * self.speed)
            need_s = self.cost_s
        else:  # already writing a checkpoint: finish it
            done = (k + 1) * self.interval_s
            need_s = period - in_segment
        return (t_s + need_s, done) if need_s <= grace_s else None
