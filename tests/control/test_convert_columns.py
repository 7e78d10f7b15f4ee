"""The loop's fast conversion of pending rows (`convert.job_of_columns`, a plain tuple of
`SCHED_COLUMNS`) builds the very job that `convert.to_job` builds from the row's attributes,
whatever the row holds, on both stores (their types come back differently: JSON, booleans).
"""

from __future__ import annotations

import pytest
from sqlalchemy import select
from tests.control.loop_helpers import seed_cluster

from railyard.control.store.convert import SCHED_COLUMNS, job_of_columns, to_job
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow

pytestmark = pytest.mark.stores

ROWS: list[dict[str, object]] = [
    {},
    {"array_parent": "7", "array_index": 3, "array_max_running": 2, "name": "sweep"},
    {"topology_level": "leaf-group", "topology_mode": "preferred", "workers": 2,
     "gpus_per_worker": 4, "distinct_nodes": True, "cpus_per_worker": 8, "mem_per_worker_gb": 64.0},
    {"dependency": "afterok:1:2,afterany:3", "hold": "user", "priority": 10, "preemptible": True},
    {"dependency": "not a dependency", "walltime_s": 600.0, "warn_before_s": 60.0,
     "min_runtime_s": 30.0, "restart_count": 2, "max_restarts": 5, "attained_gpu_s": 12.5,
     "nominated": True},
    {"topology_level": "scalable-unit", "topology_mode": None, "flavor": "H100"},
]  # fmt: skip


def test_job_of_columns_is_to_job(store: Store) -> None:
    seed_cluster(store)
    with store.session() as s:
        for i, fields in enumerate(ROWS):
            values: dict[str, object] = {
                "id": str(i + 1), "number": i + 1, "user_id": 2, "queue": "default",
                "command": ["true"], "flavor": "virtual", "submit_t_s": 100.0 + i,
                "updated_t_s": 100.0 + i,
            }  # fmt: skip
            s.add(JobRow(**{**values, **fields}))
    with store.session() as s:
        rows = s.connection().execute(select(*SCHED_COLUMNS).order_by(JobRow.number)).all()
    assert len(rows) == len(ROWS)
    for row in rows:
        assert job_of_columns(row, "alice") == to_job(row, "alice")
        assert job_of_columns(tuple(row), "alice").tie == to_job(row, "alice").tie
