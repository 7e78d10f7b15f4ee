"""sbatch --dependency=after:ID+MIN through the client's check and the live loop: the job
waits until MIN minutes after ID started (the loop wakes for it), then runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.control.loop_helpers import Cluster, states, step_until

from railyard.client.values import parse_dependency
from railyard.control.store.tables import JobRow


def test_the_client_takes_after_plus_minutes_and_only_with_after() -> None:
    assert parse_dependency("after:12+5:13") == "after:12+5:13"
    with pytest.raises(ValueError, match=r"'\+MINUTES' goes with after: only"):
        parse_dependency("afterok:12+5")
    with pytest.raises(ValueError, match="bad job ids"):
        parse_dependency("after:12+soon")


def test_the_loop_starts_it_a_minute_after_the_other_started(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, gpus=1)
    [first] = cluster.submit(command=["true"], gpus=0)
    cluster.run(first)
    started_t_s = time.time() - 57.0  # as if it had started 57 s ago: 3 s left of the minute
    with cluster.store.session() as session:
        session.get_one(JobRow, first).start_t_s = started_t_s
    [then] = cluster.submit(command=["true"], gpus=0, dependency=f"after:{first}+1")
    cluster.loop.step()
    with cluster.store.session() as session:
        row = session.get_one(JobRow, then)
        assert (row.state, row.reason) == ("pending", "Dependency")
    step_until(cluster.loop, lambda: states(cluster.store)[then] == "completed", timeout_s=30)
    with cluster.store.session() as session:
        row = session.get_one(JobRow, then)
        assert row.start_t_s is not None
        assert row.start_t_s >= started_t_s + 60.0
