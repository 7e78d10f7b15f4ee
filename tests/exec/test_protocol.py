"""The protocol's data: validation, persistence round trips, and outcome decisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from railyard.exec import JobHandle, LaunchSpec, Outcome, WorkerHandle
from railyard.exec.jobstate import JobState, RankState, decide
from railyard.exec.task.exitfile import RankExit


def worker(rank: int) -> WorkerHandle:
    return WorkerHandle(
        job_id="j",
        rank=rank,
        node="n0",
        pid=100 + rank,
        pgid=100 + rank,
        start_time_ticks=5,
        log_path=Path(f"/l/rank-{rank}.log"),
        exit_path=Path(f"/l/rank-{rank}.exit.json"),
    )


def test_handle_survives_json() -> None:
    handle = JobHandle(job_id="j", restart_count=2, workers=(worker(0), worker(1)), master_port=1)
    assert JobHandle.from_dict(json.loads(json.dumps(handle.to_dict()))) == handle


@pytest.mark.parametrize(
    ("workers", "per", "gpus", "message"),
    [(2, 2, (0, 1, 2), "placement has 3 GPUs"), (0, 1, (), "workers >= 1")],
)
def test_spec_rejects_inconsistent_sizes(
    workers: int, per: int, gpus: tuple[int, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        LaunchSpec(
            job_id="j",
            command=("true",),
            placement={"n0": gpus},
            gpus_per_worker=per,
            workers=workers,
            log_dir=Path("l"),
            checkpoint_dir=Path("c"),
        )


OK = RankExit(0, None)
FAIL = RankExit(2, None)
TERMED = RankExit(None, "SIGTERM", ("SIGTERM",))
PREEMPTED_OK = RankExit(0, None, ("SIGUSR1",))
TERMED_OK = RankExit(0, None, ("SIGTERM",))
GONE = RankExit(None, None)
STOP = {"stop_requested": True}


@pytest.mark.parametrize(
    ("exits", "flags", "outcome", "code"),
    [
        ((OK, OK), {}, Outcome.COMPLETED, 0),
        ((OK, FAIL), {}, Outcome.FAILED, 2),
        ((PREEMPTED_OK, PREEMPTED_OK), STOP, Outcome.PREEMPTED, 0),
        ((PREEMPTED_OK, PREEMPTED_OK), {}, Outcome.PREEMPTED, 0),  # adopted: learnt from files
        ((OK, OK), STOP, Outcome.COMPLETED, 0),  # finished before the signal arrived
        ((TERMED, TERMED), {**STOP, "escalated": True}, Outcome.KILLED, None),
        ((TERMED, TERMED), {"cancelled": True}, Outcome.KILLED, None),
        ((TERMED_OK, OK), {"cancelled": True}, Outcome.KILLED, 0),  # exited 0 on SIGTERM
        ((OK, OK), {"cancelled": True}, Outcome.COMPLETED, 0),  # finished before the cancel
        ((OK, GONE), {}, Outcome.LOST, 0),
        ((GONE, GONE), {}, Outcome.LOST, None),
    ],
)
def test_decide(
    exits: tuple[RankExit, ...], flags: dict[str, bool], outcome: Outcome, code: int | None
) -> None:
    handle = JobHandle(job_id="j", restart_count=0, workers=(worker(0), worker(1)), master_port=1)
    ranks = [RankState(w, None, e) for w, e in zip(handle.workers, exits, strict=True)]
    job = JobState(handle, ranks)
    for name, value in flags.items():
        setattr(job, name, value)
    report = decide(job)
    assert (report.outcome, report.exit_code) == (outcome, code)


def test_failure_names_the_first_failing_rank() -> None:
    handle = JobHandle(job_id="j", restart_count=0, workers=(worker(0), worker(1)), master_port=1)
    job = JobState(handle, [RankState(handle.workers[0], None, TERMED)])
    job.ranks.append(RankState(handle.workers[1], None, FAIL))
    job.first_failure = job.ranks[1]
    report = decide(job)
    assert (report.outcome, report.exit_code, report.signal) == (Outcome.FAILED, 2, None)


def test_the_time_limit_line_names_the_node_as_slurmstepd_does() -> None:
    """Slurm 22.05's slurmstepd logs as ``slurmstepd-NODE`` (benchmarks/slurm/compare_habits.py
    case 9 read it off a real one)."""
    from railyard.exec.task.outputs import time_limit_line

    line = time_limit_line("7", "vm", "2026-12-05T22:30:01")
    assert line == (
        "slurmstepd-vm: error: *** JOB 7 ON vm CANCELLED AT 2026-12-05T22:30:01 "
        "DUE TO TIME LIMIT ***\n"
    )
    cancelled = time_limit_line("7", "vm", "2026-12-05T22:30:01", "CANCEL")
    assert cancelled.endswith(": error: *** JOB 7 ON vm CANCELLED AT 2026-12-05T22:30:01 ***\n")
