"""Writing a rank's task file and an attempt's handle file leaves no garbage cycle (issue 55,
item 4: the server's memory grew with the jobs it started).

`json.dump`, and `json.dumps` with an indent, encode with nested closures that refer to each
other: every call left a cycle that only the cyclic collector frees, and the server collects
rarely (`loop.service.freeze_heap`), so a soak's steady submits piled them up. The files are
written once per rank and attempt: with the collector off, nothing they leave behind may be
found unreachable afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from railyard.exec.protocol import JobHandle, WorkerHandle
from railyard.exec.task.identity import Account
from railyard.exec.task.rankexit import read_handle, write_handle
from railyard.exec.task.taskfile import Task


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_a_task_file_is_written_without_a_cycle(tmp_path: Path, collector_off: None) -> None:
    task = Task(env={"A": "1", "PATH": "/usr/bin"}, cwd="/", account=Account.current(),
                cgroups=("/x", "/y"))  # fmt: skip
    path = tmp_path / "task.json"
    gc.collect()
    for _ in range(20):
        task.write(path)
    assert gc.collect() == 0
    assert Task.read(path).env == task.env


def test_a_handle_file_is_written_without_a_cycle(tmp_path: Path, collector_off: None) -> None:
    worker = WorkerHandle(job_id="7", rank=0, node="n0", pid=10, pgid=10, start_time_ticks=5,
                          log_path=tmp_path / "log", exit_path=tmp_path / "exit")  # fmt: skip
    handle = JobHandle(job_id="7", restart_count=1, workers=(worker,), master_port=29500)
    path = tmp_path / "handle.json"
    gc.collect()
    for _ in range(20):
        write_handle(path, handle)
    assert gc.collect() == 0
    assert read_handle(path) == handle
