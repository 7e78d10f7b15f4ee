"""Helpers shared by the executor tests: real processes, generous timeouts, poll loops."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.waiting import waiter

from railyard.exec import ExitReport, LaunchSpec, LocalExecutor

NODE = "n0"
MakeExecutor = Callable[..., LocalExecutor]  # the make_executor fixture (conftest.py)
TIMEOUT_S = 60.0  # far above what any test needs; only a hang reaches it


def py(code: str, *args: str) -> tuple[str, ...]:
    """A command running ``code`` in this interpreter."""
    return (sys.executable, "-c", code, *args)


def spec(
    tmp_path: Path,
    command: tuple[str, ...],
    *,
    job_id: str = "job",
    workers: int = 1,
    gpus_per_worker: int = 0,
    gpus: tuple[int, ...] = (),
    restart_count: int = 0,
    placement: dict[str, tuple[int, ...]] | None = None,
    **extra: object,
) -> LaunchSpec:
    extra.setdefault("workdir", tmp_path)
    return LaunchSpec(
        job_id=job_id,
        command=command,
        placement=placement if placement is not None else {NODE: gpus},
        gpus_per_worker=gpus_per_worker,
        workers=workers,
        restart_count=restart_count,
        log_dir=tmp_path / "logs" / job_id,
        checkpoint_dir=tmp_path / "ckpt" / job_id,
        **extra,  # type: ignore[arg-type]
    )


wait_for = waiter(TIMEOUT_S)


def wait_report(executor: LocalExecutor, job_id: str, timeout_s: float = TIMEOUT_S) -> ExitReport:
    """Poll until ``job_id`` is reported; fail if any other job is reported meanwhile."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for report in executor.poll():
            assert report.job_id == job_id, report
            return report
        time.sleep(0.05)
    raise AssertionError(f"{job_id} not reported in {timeout_s} s")


def logs(tmp_path: Path, job_id: str = "job") -> str:
    return "".join(p.read_text() for p in sorted((tmp_path / "logs" / job_id).glob("rank-*.log")))
