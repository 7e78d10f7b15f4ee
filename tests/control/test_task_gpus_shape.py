"""``--gpus-per-task``: how a submission splits into chunks the scheduler places."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from railyard.control.jobspec import Shape
from railyard.control.submission import JobSubmit


@pytest.mark.parametrize(
    ("fields", "shape"),
    [
        ({"ntasks": 4, "gpus_per_task": 2}, Shape(4, 2, False, None)),  # a chunk per task
        ({"gpus_per_task": 1}, Shape(1, 1, False, None)),  # one task by default
        ({"gpus": 6, "gpus_per_task": 2}, Shape(3, 2, False, None)),  # tasks from the GPUs
        ({"nodes": 2, "ntasks_per_node": 2, "gpus_per_task": 2}, Shape(2, 4, True, 2)),
        ({"nodes": 2, "ntasks": 4, "gpus_per_task": 1}, Shape(2, 2, True, 2)),
    ],
)
def test_tasks_become_chunks(fields: dict[str, Any], shape: Shape) -> None:
    assert JobSubmit(command=["true"], **fields).shape() == shape


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"gpus": 5, "ntasks": 2, "gpus_per_task": 2}, "gpus=5 but tasks x gpus_per_task = 4"),
        ({"gpus_per_node": 4, "gpus_per_task": 1}, "gpus_per_task: give it with ntasks"),
        ({"gpus_per_task": 0}, "gpus_per_task"),
    ],
)
def test_contradictions_are_one_line(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        JobSubmit(command=["true"], **fields)
