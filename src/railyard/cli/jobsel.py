"""Which jobs a command names: squeue's and sacct's ``-j 12,13_2`` and ``-t PD,R`` (and
Slurm's state names), shared by ``queue``, ``history``, ``cancel`` and ``sprio``; the standard
library and :func:`fail` only, so the command that uses them pays for nothing else (``queue``
used to import ``history``'s module, and with it ``datetime`` and the time parser).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from railyard.cli.args import fail
from railyard.client.bounds import JOB_ID_PATTERN

SLURM_STATES = {
    "pd": ("pending",), "cf": ("starting",), "configuring": ("starting",), "r": ("running",),
    "cg": ("preempting", "cancelling"), "completing": ("preempting", "cancelling"),
    "cd": ("completed",), "f": ("failed",), "ca": ("cancelled",), "to": ("timeout",),
    "nf": ("node_fail",), "dl": ("deadline",),
}  # fmt: skip
"""squeue's and sacct's short state codes (``-t PD,R``) and Slurm's names that railyard
spells otherwise, as railyard's states (as in ``jobformat.COMPACT``)."""


def states_of(values: list[str] | None) -> list[str]:
    """``-t pending,running`` (repeatable), or Slurm's codes ``-t PD,R`` / names ``-t
    COMPLETING``, as railyard's states, in order, each once."""
    words = [s.strip().lower() for item in values or [] for s in item.split(",") if s.strip()]
    return list(dict.fromkeys(state for w in words for state in SLURM_STATES.get(w, (w,))))


JOBS_HELP = "only these jobs: 12,13_2,14_[1-3] (an array's id: its tasks)"
_JOB_ID = re.compile(JOB_ID_PATTERN)
_TASKS = re.compile(r"^([0-9]+)_\[([^\]]*)\]$")
_OUTSIDE_BRACKETS = re.compile(r",(?![^\[]*\])")


def expand_ids(texts: list[str], what: str = "ID") -> list[str]:
    """Job ids as Slurm's commands take them: ``12``, ``12_3``, comma lists (``12_1,12_2``)
    and an array's tasks in brackets (``12_[1-3,7]``, ``12_[0-15:4]``), each id once, in
    order. A bracket names at most as many tasks as an array may hold."""
    from railyard.client.values import parse_array

    ids: list[str] = []
    for text in texts:
        for part in _OUTSIDE_BRACKETS.split(text):
            part = part.strip()
            tasks = _TASKS.match(part)
            if tasks is None:
                if part:
                    ids.append(part)
                continue
            if "%" in tasks[2]:
                fail(f"{what}: {part!r}: a throttle (%N) names no task (hint: 12_[1-3])")
            try:
                indices, _ = parse_array(tasks[2])
            except ValueError as exc:
                fail(f"{what}: {part!r}: {exc}")
            ids += [f"{tasks[1]}_{i}" for i in indices]
    return list(dict.fromkeys(ids))


def job_ids(text: str) -> list[str]:
    """``-j 12,13_2,14_[1-3]``: sacct's and squeue's comma-separated job list."""
    ids = expand_ids([text], "--jobs")
    if not ids:
        fail(f"--jobs: no job id in {text!r} (hint: -j 12 or -j 12,13_2)")
    for job_id in ids:
        if not _JOB_ID.fullmatch(job_id):  # squeue: "Invalid job id specified"
            fail(f"--jobs: {job_id!r} is not a job id (hint: -j 12 or -j 12,13_2)")
    return ids


def matches(job: Mapping[str, Any], wanted: list[str]) -> bool:
    """Whether a job record is one of ``wanted``, a task of an array among them (``12`` names
    ``12_0``, ``12_1``... as in Slurm), or an array task named by its own number (``13`` for
    ``12_0``: its ``SLURM_JOB_ID``, which ``squeue -j`` and ``sacct -j`` take too)."""
    job_id: str = job["id"]
    if job_id in wanted or job_id.split("_", 1)[0] in wanted:
        return True
    number = job.get("task_number")
    return number is not None and str(number) in wanted
