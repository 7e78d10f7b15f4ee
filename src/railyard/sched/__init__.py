"""railyard.sched: the pure scheduling core.

`cycle(state, now_t_s, config)` reads a `ClusterState` and returns decisions with reasons. No
I/O, no clock, no threads: the simulator and the live control plane drive the same code.
"""

from railyard.sched.accounting import accrue_usage, expand_array, queue_path
from railyard.sched.cache import CycleCache
from railyard.sched.config import SchedulerConfig
from railyard.sched.cycle import cycle, estimate_start_t_s
from railyard.sched.decisions import (
    CycleResult,
    Preempt,
    PreemptReason,
    Reason,
    Requeue,
    Reservation,
    Start,
    StartReason,
)
from railyard.sched.model import (
    ClusterState,
    Job,
    Level,
    Node,
    NodeState,
    Placement,
    PriorityClass,
    Queue,
    RunningJob,
    StopCause,
    TopologyMode,
    TopologyRequirement,
    Usage,
)

__all__ = [
    "ClusterState",
    "CycleCache",
    "CycleResult",
    "Job",
    "Level",
    "Node",
    "NodeState",
    "Placement",
    "Preempt",
    "PreemptReason",
    "PriorityClass",
    "Queue",
    "Reason",
    "Requeue",
    "Reservation",
    "RunningJob",
    "SchedulerConfig",
    "Start",
    "StartReason",
    "StopCause",
    "TopologyMode",
    "TopologyRequirement",
    "Usage",
    "accrue_usage",
    "cycle",
    "estimate_start_t_s",
    "expand_array",
    "queue_path",
]
