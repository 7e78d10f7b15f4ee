"""railyard.sim: the scheduler core on a virtual clock, fed by traces and failure models.

The same `sched.cycle` that runs the live control plane decides here; a virtual executor
speaks the `exec.protocol.Executor` protocol, and the driver applies the same
`sched.lifecycle.step` as the live loop.
Modules: `engine` (event heap), `executor`, `driver`, `checkpoints`, `failures`, `traces`,
`synthetic`, `metrics`, `sweep` (policies, scenarios, `sweep.sweep` over processes or Ray),
`plots` (optional).
"""

from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.cluster import cluster_nodes, flat_queues
from railyard.sim.driver import NodeEvent, SimConfig, Simulation
from railyard.sim.engine import Engine, Event, EventKind
from railyard.sim.executor import VirtualExecutor
from railyard.sim.failures import FailureModel, InjectedFailure
from railyard.sim.metrics import summarize
from railyard.sim.records import JobRecord, RunLog
from railyard.sim.sweep import POLICIES, Scenario, policy_config, run_scenario
from railyard.sim.synthetic import PROFILES, generate
from railyard.sim.traces import FORMATS, TraceError, load_trace
from railyard.sim.workload import FinalState, TraceJob, Workload

__all__ = [
    "FORMATS",
    "POLICIES",
    "PROFILES",
    "CheckpointPolicy",
    "Engine",
    "Event",
    "EventKind",
    "FailureModel",
    "FinalState",
    "InjectedFailure",
    "IntervalRule",
    "JobRecord",
    "NodeEvent",
    "RunLog",
    "Scenario",
    "SimConfig",
    "Simulation",
    "TraceError",
    "TraceJob",
    "VirtualExecutor",
    "Workload",
    "cluster_nodes",
    "flat_queues",
    "generate",
    "load_trace",
    "policy_config",
    "run_scenario",
    "summarize",
]
