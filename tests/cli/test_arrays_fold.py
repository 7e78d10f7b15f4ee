"""squeue's folding of an array's pending tasks, on the client's own job dicts."""

from __future__ import annotations

from typing import Any

from railyard.cli.arrays import fold_pending, ranges


def _job(job_id: str, state: str, parent: str | None = None, index: int | None = None,
         array: str | None = None) -> Any:  # fmt: skip
    reason = "JobArrayTaskLimit" if state == "pending" else "Fits"
    return {"id": job_id, "state": state, "array_parent": parent, "array_index": index,
            "array": array, "reason": reason}  # fmt: skip


def test_ranges_as_slurm_writes_them() -> None:
    assert ranges([3]) == "3"
    assert ranges([5, 1, 2, 3, 7, 8]) == "1-3,5,7-8"


def test_pending_tasks_fold_where_the_first_was() -> None:
    jobs = [_job("1", "running"), _job("2_0", "running", "2", 0, "0-5%1"),
            *(_job(f"2_{i}", "pending", "2", i, "0-5%1") for i in (1, 2, 3, 5)),
            _job("3", "pending"), _job("4_0", "pending", "4", 0, "0-1"),
            _job("4_1", "completed", "4", 1, "0-1")]  # fmt: skip
    assert [j["id"] for j in fold_pending(jobs)] == ["1", "2_0", "2_[1-3,5%1]", "3", "4_0", "4_1"]
    assert fold_pending(jobs)[2]["reason"] == "JobArrayTaskLimit"
