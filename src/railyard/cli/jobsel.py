"""Which jobs a command names: squeue's and sacct's ``-j 12,13_2`` and ``-t PD,R`` (and
Slurm's state names), shared by ``queue``, ``history``, ``cancel`` and ``sprio``; the standard
library and :func:`fail` only, so the command that uses them pays for nothing else (``queue``
used to import ``history``'s module, and with it ``datetime`` and the time parser).
"""

from __future__ import annotations

from railyard.cli.args import fail

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


JOBS_HELP = "only these jobs: 12,13_2 (an array's id: its tasks)"


def job_ids(text: str) -> list[str]:
    """``-j 12,13_2``: sacct's and squeue's comma-separated job list."""
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        fail(f"--jobs: no job id in {text!r} (hint: -j 12 or -j 12,13_2)")
    return ids


def matches(job_id: str, wanted: list[str]) -> bool:
    """Whether ``job_id`` is one of ``wanted`` or a task of an array among them (``12`` names
    ``12_0``, ``12_1``... as in Slurm)."""
    return job_id in wanted or job_id.split("_", 1)[0] in wanted
