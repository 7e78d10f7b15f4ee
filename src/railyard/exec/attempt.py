"""Start markers: at most one run of each rank of each attempt, whatever crashes in between.

Before it runs its command, a rank's wrapper claims ``(job, attempt, rank)`` by creating the
rank's start marker, which names the wrapper's pid and start time. Creation is atomic and
exclusive (the content is written and fsynced to a private file first, then hard-linked to
the marker's name, which fails if the name exists) and the directory is fsynced, so the claim
survives a crash of the control plane or of the machine. A second wrapper of the same rank
and attempt, from a relaunch after a crash, finds the marker and stands down without running
anything. Once an attempt is reported, the executor seals the ranks that never claimed, so a
wrapper that was launched but had not started yet can never run later either.

The marker is also the truth about which process runs the rank: a handle records the pid the
executor launched, which is not the running one if that wrapper stood down.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

EXIT_SUFFIX = ".exit.json"
START_SUFFIX = ".start.json"
READY_SUFFIX = ".ready"
STOOD_DOWN_EXIT = 75  # EX_TEMPFAIL: this wrapper did not run the command, another one did


@dataclass(frozen=True)
class Claim:
    """What a start marker says: the wrapper that runs the rank, or sealed (it never ran)."""

    pid: int | None
    start_time_ticks: int | None

    @property
    def sealed(self) -> bool:
        return self.pid is None


def exit_record_path(records_dir: Path, restart_count: int, rank: int) -> Path:
    """Where the wrapper of ``rank`` in attempt ``restart_count`` records how it ended."""
    return records_dir / f"rank-{rank}.restart-{restart_count}{EXIT_SUFFIX}"


def start_marker_path(exit_path: Path) -> Path:
    """The start marker beside an exit record: the wrapper is given only its exit path."""
    return exit_path.with_name(exit_path.name.removesuffix(EXIT_SUFFIX) + START_SUFFIX)


def ready_marker_path(exit_path: Path) -> Path:
    """Beside an exit record: written once a container task's image is on the node, so its
    time limit starts then (`sched.model.RunningJob.run_t_s`)."""
    return exit_path.with_name(exit_path.name.removesuffix(EXIT_SUFFIX) + READY_SUFFIX)


def mark_ready(marker: Path, t_s: float) -> None:
    """Record when the task's image was ready (its first writer wins; never follows a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(marker, flags, 0o644)
    except FileExistsError:
        return
    try:
        os.write(fd, f"{t_s!r}\n".encode())
    finally:
        os.close(fd)


def read_ready(marker: Path) -> float | None:
    """When the task's image was ready; None while it is not (or the marker is unreadable)."""
    try:
        return float(marker.read_text())
    except (OSError, ValueError):
        return None


def claim(marker: Path, pid: int, start_time_ticks: int) -> bool:
    """Claim the rank for process ``pid``; False when it was claimed or sealed before."""
    return _create(marker, {"pid": pid, "start_time_ticks": start_time_ticks})


def seal(marker: Path) -> bool:
    """Make sure no wrapper ever claims this rank; False when one already did (or it was
    sealed before)."""
    return _create(marker, {"sealed": True})


def read_claim(marker: Path) -> Claim | None:
    """The marker's claim, or None when nobody has claimed or sealed the rank."""
    try:
        data = json.loads(marker.read_text())
    except FileNotFoundError:
        return None
    if data.get("sealed"):
        return Claim(None, None)
    return Claim(int(data["pid"]), int(data["start_time_ticks"]))


def _create(marker: Path, content: dict[str, object]) -> bool:
    """Create ``marker`` with ``content`` if absent, atomically and durably."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    private = marker.with_name(f".{marker.name}.{os.getpid()}.tmp")
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, (json.dumps(content) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(private, marker)  # atomic; EEXIST if anyone got there first
    except FileExistsError:
        return False
    finally:
        private.unlink(missing_ok=True)
    _fsync_dir(marker.parent)
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
