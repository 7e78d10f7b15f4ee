"""What one simulation run is told: its policies, world model and loop timing (`SimConfig`),
and the admin's node actions along the way (`NodeEvent`). Apart from the driver
(`railyard.sim.driver`), which runs them and re-exports both."""

from __future__ import annotations

from dataclasses import dataclass, field

from railyard.sched import SchedulerConfig
from railyard.sim.checkpoints import CheckpointPolicy
from railyard.sim.failures import FailureModel
from railyard.sim.health import HealthWorld
from railyard.sim.images import ImageWorld


@dataclass(frozen=True)
class NodeEvent:
    """An admin action at `t_s`: `drain` (no new work; drained once empty) or `resume`."""

    t_s: float
    node: str
    action: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.action not in ("drain", "resume"):
            raise ValueError(f"node event action must be drain or resume, not {self.action!r}")


@dataclass(frozen=True)
class SimConfig:
    """Policies, world model and loop timing of one run. Everything random follows `seed`."""

    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    checkpoint: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    failures: FailureModel | None = None
    cycle_interval_s: float = 60.0
    coalesce_s: float = 0.0
    grace_s: float = 120.0
    keep_submit_time: bool = True
    seed: int = 0
    record_events: bool = False
    skip_idle_ticks: bool = True
    node_events: tuple[NodeEvent, ...] = ()
    health: HealthWorld | None = None  # the scheduler's health checks, and slow nodes
    images: ImageWorld | None = None  # container pulls at cold starts (None: free)

    def __post_init__(self) -> None:
        if self.cycle_interval_s <= 0 or self.coalesce_s < 0 or self.grace_s < 0:
            raise ValueError("cycle_interval_s must be > 0; coalesce_s and grace_s >= 0")
