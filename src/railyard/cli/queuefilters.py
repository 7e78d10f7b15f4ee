"""squeue's filters and order that the API does not apply: ``-w/--nodelist``, ``-A/--account``,
``-q/--qos`` and ``-S/--sort``. Imported only when one is given (``queue`` alone stays light)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from railyard.cli.jobformat import SQUEUE, shown_priority, task_count
from railyard.client.values import qos_of

if TYPE_CHECKING:
    from railyard.client.wire import Job


def filtered(
    jobs: list[Job], *, nodes: str | None, accounts: str | None, qos: str | None
) -> list[Job]:
    """The jobs on any of ``nodes`` (a hostlist: ``gpu[01-04]``), of any of ``accounts``
    (railyard's account is the queue) and of any of ``qos`` (the priority class); comma
    lists, as squeue takes them. ValueError: one line, for a bad hostlist."""
    if nodes:
        from railyard.client.values import parse_hostlist

        wanted = set(parse_hostlist(nodes))
        jobs = [j for j in jobs if wanted & set(j["placement"] or {})]
    if accounts:
        names = {a.strip() for a in accounts.split(",") if a.strip()}
        jobs = [j for j in jobs if j["queue"] in names]
    if qos:
        classes = {q.strip().lower() for q in qos.split(",") if q.strip()}
        jobs = [j for j in jobs if qos_of(j["priority"], j.get("nice", 0)) in classes]
    return jobs


def _job_number(job: Job) -> tuple[int, int]:
    """An id in the order Slurm sorts ids: the array's (or job's) number, then the task's."""
    head, _, task = job["id"].partition("_")
    return (int(head) if head.isdigit() else 0, int(task) if task.isdigit() else -1)


def _used_s(job: Job) -> float:
    start = job["start_t_s"]
    if start is None:
        return 0.0
    return (job["end_t_s"] or time.time()) - start


_NUMERIC: dict[str, Callable[[Job], Any]] = {
    "i": _job_number,
    "A": _job_number,
    "F": lambda j: _job_number(j)[0],
    "p": shown_priority,
    "Q": shown_priority,
    "V": lambda j: j["submit_t_s"],
    "S": lambda j: j["start_t_s"] or 0.0,
    "e": lambda j: j["end_t_s"] or 0.0,
    "M": _used_s,
    "l": lambda j: j["walltime_s"] if j["walltime_s"] is not None else float("inf"),
    "D": lambda j: len(j["placement"] or {}) or 1,
    "C": task_count,
    "y": lambda j: j.get("nice", 0),
}
"""Fields whose order is a number's, not the order of their printed text (``10`` after ``9``)."""


def sort_jobs(jobs: list[Job], spec: str) -> list[Job]:
    """squeue ``-S``: comma-separated format letters (``%`` optional), each ascending or, after
    ``-``, descending (``+`` ascending), the first letter first: ``-S -p,i``. ValueError: one
    line naming an unknown letter."""
    keys: list[tuple[Callable[[Job], Any], bool]] = []
    for item in (s.strip() for s in spec.split(",")):
        down = item.startswith("-")
        letter = item.lstrip("+-").lstrip("%")
        if letter not in _NUMERIC and letter not in SQUEUE:
            raise ValueError(f"--sort: unknown field {item!r} (hint: format letters, e.g. -S -p,i)")
        keys.append((_NUMERIC.get(letter) or SQUEUE[letter], down))
    out = list(jobs)
    for key, down in reversed(keys):  # stable sorts, the last key first
        out.sort(key=key, reverse=down)
    return out
