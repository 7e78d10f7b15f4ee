"""A local rank's end and an attempt's records, as the local executor reads and writes them:
whether a rank exited (and what it left in its process group killed), which wrapper really
runs a rank (the start marker's claimant, `exec.attempt`), the attempt's report once every
rank ended, and the handle and launch-port records that let a restarted control plane adopt
what runs. Apart from `exec.local`, which keeps the executor's own flow."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from dataclasses import replace
from pathlib import Path

from railyard.exec import procfs
from railyard.exec.attempt import read_claim, seal, start_marker_path
from railyard.exec.jobstate import JobState, RankState, decide
from railyard.exec.protocol import ExitReport, JobHandle, WorkerHandle
from railyard.exec.task.exitfile import UNKNOWN, RankExit, read_exit
from railyard.exec.task.launch import free_port


def exit_of(rank: RankState) -> RankExit | None:
    """The rank's end if it has exited, after killing what it left in its group.

    A process that exits is checked against the rank's start marker: if another wrapper
    claimed the rank (ours stood down), that one is watched from now on.
    """
    worker = rank.handle
    if rank.proc is not None:
        try:
            # Peek without reaping: the zombie keeps the pgid ours while we sweep the group.
            status = os.waitid(os.P_PID, worker.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped behind our back (SIGCHLD ignored, os.wait()...)
            rank.proc = None
            return exit_of(rank)
        if status is None:
            return None
        procfs.signal_group(worker.pgid, worker.start_time_ticks, signal.SIGKILL)
        returncode = rank.proc.wait()
        if _follow_claimant(rank):
            return exit_of(rank)
        return read_exit(worker.exit_path) or RankExit.from_returncode(returncode)
    if procfs.is_alive(worker.pid, worker.start_time_ticks):
        return None
    if _follow_claimant(rank):
        return exit_of(rank)
    procfs.signal_group(worker.pgid, worker.start_time_ticks, signal.SIGKILL)
    return read_exit(worker.exit_path) or UNKNOWN


def claimant(worker: WorkerHandle) -> WorkerHandle:
    """The worker that claimed this rank's start marker (``worker`` itself if none did)."""
    claimed = read_claim(start_marker_path(worker.exit_path))
    if claimed is None or claimed.pid is None or claimed.start_time_ticks is None:
        return worker
    return replace(
        worker, pid=claimed.pid, pgid=claimed.pid, start_time_ticks=claimed.start_time_ticks
    )


def _follow_claimant(rank: RankState) -> bool:
    """Watch the rank's claimant instead of an exited process that was not it; True if so."""
    found = claimant(rank.handle)
    if (found.pid, found.start_time_ticks) == (rank.handle.pid, rank.handle.start_time_ticks):
        return False
    rank.handle, rank.proc = found, None
    return True


def report(job: JobState) -> ExitReport:
    """The job's outcome; first seal its ranks that nobody claimed, so that a wrapper of this
    attempt still on its way can never run after the attempt was reported."""
    for rank in job.ranks:
        with contextlib.suppress(OSError):  # records unwritable: the report must still go out
            seal(start_marker_path(rank.handle.exit_path))
    return decide(job)


def launch_port(path: Path, address: str) -> int:
    """The port an earlier launch of this attempt recorded, or a new one free on ``address``,
    recorded now."""
    try:
        port = int(json.loads(path.read_text())["port"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError, ValueError):
        port = free_port(address)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"port": port}) + "\n")
        os.replace(tmp, path)
    return port


def write_handle(path: Path, handle: JobHandle) -> None:
    tmp = path.with_name(path.name + ".tmp")
    # no indent: an indented dumps encodes with closures in a cycle, garbage until a full
    # collection (see `taskfile.Task.write`); one line reads as well
    tmp.write_text(json.dumps(handle.to_dict()) + "\n")
    os.replace(tmp, path)


def read_handle(path: Path) -> JobHandle | None:
    try:
        return JobHandle.from_dict(json.loads(path.read_text()))
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None
