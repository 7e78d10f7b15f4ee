"""The job-wide SLURM_* variables a row gives its job (control/loop/launchspec.py)."""

from __future__ import annotations

from railyard.control.loop.launchspec import slurm_compat_env
from railyard.control.store.tables import JobRow


def _row(**kw: object) -> JobRow:
    fields: dict[str, object] = {
        "number": 7, "task_number": None, "name": "train", "queue": "gpu", "restart_count": 0,
        "submit_dir": "/home/a", "submit_host": "login1", "cpus_per_task": 0,
        "mem_per_node_mb": 0, "export": "ALL", "array_parent": None, "array_index": None,
        "dependency": None, "command": ["true"], "script": None,
    }  # fmt: skip
    return JobRow(**(fields | kw))


def test_a_dependency_is_in_slurm_job_dependency_as_given() -> None:
    assert "SLURM_JOB_DEPENDENCY" not in slurm_compat_env(_row())
    env = slurm_compat_env(_row(dependency="afterok:3:4,afterany:5"))
    assert env["SLURM_JOB_DEPENDENCY"] == "afterok:3:4,afterany:5"
    assert (env["SLURM_JOB_ID"], env["SLURM_JOB_PARTITION"]) == ("7", "gpu")
