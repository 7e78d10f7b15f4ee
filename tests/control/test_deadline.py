"""``sbatch --deadline`` through the live loop: a pending job that could no longer end by its
deadline (now plus its time limit is later) ends DEADLINE without starting, with Slurm's
reason and an event; its ``afterok`` dependents never run, its ``afterany`` ones do; a job
whose deadline is still reachable keeps waiting."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import select
from tests.control.loop_helpers import Cluster, states, step_until, stop_all

from railyard.control.store.tables import EventRow, JobRow


def test_a_job_that_can_no_longer_end_in_time_ends_deadline(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, gpus=1)
    [busy] = cluster.submit(command=["sleep", "60"], gpus=1)
    step_until(cluster.loop, lambda: states(cluster.store)[busy] == "running")
    now = time.time()
    # 3 s to its deadline with a 2 s limit: it must start within 1 s, and the GPU is busy
    [late] = cluster.submit(command=["true"], gpus=1, time="00:00:02", deadline_t_s=now + 3)
    [roomy] = cluster.submit(command=["true"], gpus=1, time="1:00", deadline_t_s=now + 600)
    [ok_dep] = cluster.submit(command=["true"], gpus=0, dependency=f"afterok:{late}")
    [any_dep] = cluster.submit(command=["true"], gpus=0, dependency=f"afterany:{late}")
    try:
        step_until(cluster.loop, lambda: states(cluster.store)[any_dep] == "completed")
        assert time.time() >= now + 1  # not before its latest start
        with cluster.store.session() as session:
            row = session.get_one(JobRow, late)
            assert (row.state, row.reason, row.start_t_s) == ("deadline", "DeadLine", None)
            assert row.end_t_s is not None
            assert now + 1 <= row.end_t_s < now + 10
            kinds = session.scalars(select(EventRow.kind).where(EventRow.job_id == late)).all()
            assert "deadline" in kinds
            waiting = session.get_one(JobRow, ok_dep)
            assert (waiting.state, waiting.reason) == ("pending", "DependencyNeverSatisfied")
        assert states(cluster.store)[roomy] == "pending"  # 600 s away: it may still run
    finally:
        stop_all(cluster.loop)
