"""Schemathesis over ``/openapi.json`` against the real ASGI app and a real SQLite store, as an
admin and as a plain user, seeded and bounded: no 5xx, and every response (errors included)
matches the schema. Then one scheduler step over whatever the fuzzing stored must succeed.

The main tier fuzzes 4 examples per operation and mode; the extended tier (``pytest -m slow``)
60. ``benchmarks/fuzz_api.py`` runs the same with many more examples, on both stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from railyard.control.api.app import create_app
from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store, sqlite_url
from railyard.exec.protocol import ExitReport, JobHandle, LaunchSpec
from railyard.sched import SchedulerConfig
from railyard.web.whatif import twin
from tests.control.conftest import Seeder
from tests.integration.fuzz_api import fuzz
from tests.tiers import tiered

pytestmark = pytest.mark.long  # few tests, long ones: handed out first (tests/conftest.py)


class RecordingExecutor:
    """Starts nothing: fuzzed jobs carry random commands that must not run on this machine,
    so the loop's step is checked against this stand-in, which only records its starts."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, spec: LaunchSpec) -> JobHandle:
        self.started.append(spec.job_id)
        return JobHandle(
            job_id=spec.job_id, restart_count=spec.restart_count, workers=(), master_port=0
        )

    def request_checkpoint_stop(self, job_id: str, grace_s: float) -> None:
        pass

    def cancel(self, job_id: str) -> None:
        pass

    def poll(self) -> list[ExitReport]:
        return []

    def adopt(self, handles: Sequence[JobHandle]) -> list[ExitReport]:
        return []

    def running(self) -> set[str]:
        return set()


@tiered("examples", 4, 60)
def test_fuzzed_api_has_no_5xx_and_keeps_its_schema(tmp_path: Path, examples: int) -> None:
    store = Store(sqlite_url(tmp_path / "railyard.db"))
    try:
        tokens = Seeder(store).cluster()
        # as `railyard up` builds it: the what-if routes run the twin
        app = create_app(
            store, wake=lambda: None, state_dir=tmp_path, whatif=twin(SchedulerConfig())
        )
        failures: dict[str, Any] = {}
        requests = 0
        for who in ("alice", "root"):
            report = fuzz(app, tokens[who], examples=examples, fuzz_seed=20261123)
            requests += report.requests
            failures.update({f"{who}: {k}": v for k, v in report.failures.items()})
            assert report.server_errors == 0, report.failures
        assert failures == {}
        assert requests > 200 * examples / 25  # every operation was exercised
        executor = RecordingExecutor()
        loop = Loop(store, executor, LoopConfig(state_dir=tmp_path))
        loop.step()  # whatever was stored, the scheduler cycles over it without raising
    finally:
        store.close()
