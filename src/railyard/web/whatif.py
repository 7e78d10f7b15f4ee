"""What-if from the live state: the simulator (the same scheduler and lifecycle code) run on
the cluster as it is now, to say when each pending job should start.

The store is read by the use-case (`control.usecases.whatif`), which also decides whose jobs
the viewer sees; this module only turns its input into a trace and runs the twin on it under
the server's policy (control sits below the simulator, so the twin is handed in from here).
"""

from __future__ import annotations

import threading

from sqlalchemy.orm import Session

from railyard.control.usecases.whatif import Simulate, WhatIfInput, every_start
from railyard.sched import SchedulerConfig


def twin(scheduler: SchedulerConfig) -> Simulate:
    """A `simulate` for the use-case: job id -> first start (s from now), or None."""

    def simulate(found: WhatIfInput) -> dict[str, float | None]:
        # the simulator loads with the first what-if asked, not with every server (~120 ms
        # of its start: the simulator's package brings numpy, the twin and the YAML loader)
        from railyard.sim.driver import SimConfig, Simulation
        from railyard.sim.workload import TraceJob, Workload

        trace = [
            TraceJob(j.job_id, j.submit_s, j.gpus, j.runtime_s, queue=j.queue, user=j.user,
                     priority=j.priority, walltime_s=j.walltime_s, preemptible=j.preemptible)
            for j in found.jobs
        ]  # fmt: skip
        config = SimConfig(scheduler=scheduler, keep_submit_time=True)
        log = Simulation(found.nodes, Workload.of("live", trace), config, found.queues).run()
        return {job_id: record.first_start_t_s for job_id, record in log.records.items()}

    return simulate


MISS_AGAIN_S = 2.0  # a job newer than the last run: run again, but not more often than this


class StartCache:
    """Every pending job's expected start from one twin run, reused for ``ttl_s``: a job page
    asks for its own start without running the simulator (seconds) on every view. The caller
    checks that the viewer may see the job; the cache holds times only."""

    def __init__(self, simulate: Simulate, ttl_s: float = 30.0) -> None:
        self.simulate, self.ttl_s = simulate, ttl_s
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._starts: dict[str, float | None] = {}

    def start_t_s(self, session: Session, job_id: str, now_t_s: float) -> tuple[bool, float | None]:
        """(known, start): known is False for a job the last run did not see pending."""
        with self._lock:  # one twin run at a time; the others wait for its answer
            age_s = now_t_s - self._at
            if age_s > self.ttl_s or (job_id not in self._starts and age_s > MISS_AGAIN_S):
                self._starts = every_start(session, now_t_s, self.simulate)
                self._at = now_t_s
            return job_id in self._starts, self._starts.get(job_id)
