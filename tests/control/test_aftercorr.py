"""``--dependency=aftercorr:A`` through the live loop: task k of B starts once task k of A
completed, while A's other tasks still run; a task of B whose A task failed never starts."""

from __future__ import annotations

from pathlib import Path

from tests.control.loop_helpers import Cluster, states, step_until, stop_all

from railyard.control.store.tables import JobRow

SCRIPT_A = (
    "#!/bin/bash\n"
    '[ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 3\n'  # task 1 fails
    '[ "$SLURM_ARRAY_TASK_ID" = 2 ] && sleep 60\n'  # task 2 runs on
    "exit 0\n"
)


def test_each_task_waits_for_its_own_index(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    a = cluster.submit(script=SCRIPT_A, array="0-2", gpus=0, name="a")
    array_a = a[0].split("_")[0]
    b = cluster.submit(
        script="#!/bin/bash\nexit 0\n", array="0-2", gpus=0, name="b",
        dependency=f"aftercorr:{array_a}",
    )  # fmt: skip
    b0, b1, b2 = sorted(b)
    try:
        step_until(cluster.loop, lambda: states(cluster.store)[b0] == "completed")
        now = states(cluster.store)
        assert now[f"{array_a}_2"] == "running"  # A's task 2 still runs: B_0 did not wait
        assert now[b2] == "pending"
        with cluster.store.session() as session:
            reasons = {j: session.get_one(JobRow, j).reason for j in (b1, b2)}
        assert reasons == {b1: "DependencyNeverSatisfied", b2: "Dependency"}
    finally:
        stop_all(cluster.loop)
