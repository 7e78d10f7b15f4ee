"""Every executor a test makes is cleaned up after it, so a failing test leaks no process."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from exec_helpers import NODE, MakeExecutor

from railyard.exec import LocalExecutor


@pytest.fixture
def make_executor() -> Iterator[MakeExecutor]:
    made: list[LocalExecutor] = []

    def make(gpus: int | None = None, **kwargs: float) -> LocalExecutor:
        kwargs.setdefault("term_grace_s", 5.0)
        executor = LocalExecutor(NODE, gpus, **kwargs)  # type: ignore[arg-type]
        made.append(executor)
        return executor

    yield make
    for executor in made:
        for job_id in executor.running():
            executor.cancel(job_id)
        deadline = time.monotonic() + 60
        while executor.running() and time.monotonic() < deadline:
            executor.poll()
            time.sleep(0.05)
