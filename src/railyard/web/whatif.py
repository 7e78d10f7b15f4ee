"""What-if from the live state: the simulator (the same scheduler and lifecycle code) run on
the cluster as it is now, to say when each pending job should start.

The store is read by the use-case (`control.usecases.whatif`), which also decides whose jobs
the viewer sees; this module only turns its input into a trace and runs the twin on it under
the server's policy (control sits below the simulator, so the twin is handed in from here).
"""

from __future__ import annotations

from railyard.control.usecases.whatif import Simulate, WhatIfInput
from railyard.sched import SchedulerConfig
from railyard.sim.driver import SimConfig, Simulation
from railyard.sim.workload import TraceJob, Workload


def twin(scheduler: SchedulerConfig) -> Simulate:
    """A `simulate` for the use-case: job id -> first start (s from now), or None."""

    def simulate(found: WhatIfInput) -> dict[str, float | None]:
        trace = [
            TraceJob(j.job_id, j.submit_s, j.gpus, j.runtime_s, queue=j.queue, user=j.user,
                     priority=j.priority, walltime_s=j.walltime_s, preemptible=j.preemptible)
            for j in found.jobs
        ]  # fmt: skip
        config = SimConfig(scheduler=scheduler, keep_submit_time=True)
        log = Simulation(found.nodes, Workload.of("live", trace), config, found.queues).run()
        return {job_id: record.first_start_t_s for job_id, record in log.records.items()}

    return simulate
