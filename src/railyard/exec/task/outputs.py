"""The record of the files a rank's output went to, written by the wrapper beside the rank's
exit record and read by :mod:`railyard.exec.logread` (which shows no other file).

A module of its own, on the standard library alone, because every rank's wrapper is a fresh
interpreter: it should not pay for the log reader's sockets to write one small JSON file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from railyard.exec.attempt import EXIT_SUFFIX

OUTPUTS_SUFFIX = ".outputs.json"
TIME_LIMIT_SUFFIX = ".timelimit"


def time_limit_cue_path(exit_path: Path) -> Path:
    """Written by the executor, in its own directory, before it stops a rank at the job's time
    limit or for a requeue (the cue holds which, :data:`STOP_WORDS`): the rank's wrapper then
    says so in the job's output (:func:`time_limit_line`)."""
    return exit_path.with_name(exit_path.name.removesuffix(EXIT_SUFFIX) + TIME_LIMIT_SUFFIX)


CANCEL = "CANCEL"  # a user's or admin's cancel: slurmstepd gives no reason
STOP_WORDS = ("TIME LIMIT", "JOB REQUEUE", CANCEL)
"""What slurmstepd says a job was stopped for, after ``DUE TO`` (the cue's content)."""


def time_limit_line(job: str, host: str, at: str, why: str = "TIME LIMIT") -> str:
    """slurmstepd's words when it stops a job at its time limit, for a requeue or a cancel
    (``why``, one of :data:`STOP_WORDS`; ``at``: local ISO time); its log prefix names the
    node (``slurmstepd-vm: error: ...``, Slurm 22.05)."""
    due = "" if why == CANCEL else f" DUE TO {why}"
    return f"slurmstepd-{host}: error: *** JOB {job} ON {host} CANCELLED AT {at}{due} ***\n"


def outputs_record_path(exit_path: Path) -> Path:
    """The record of a rank's output files, beside its exit record."""
    return exit_path.with_name(exit_path.name.removesuffix(EXIT_SUFFIX) + OUTPUTS_SUFFIX)


def record_outputs(path: Path, files: list[tuple[int, int]]) -> None:
    """Write which (device, inode) pairs a rank's output went to; written by the wrapper as
    the executor's account, in the executor's own directory, so the job cannot forge it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump({"files": [list(pair) for pair in files]}, f)
    os.replace(tmp, path)
