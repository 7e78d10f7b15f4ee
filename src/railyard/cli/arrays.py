"""squeue's way with arrays: the pending tasks of one array are one line, ``12_[3-9%2]``, until
they start (``-r``/``--array`` lists one line per task, as ``squeue -r``). Started and ended
tasks keep their own lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from railyard.client.wire import Job


def ranges(indices: list[int]) -> str:
    """``[1, 2, 3, 5, 7, 8]`` -> ``1-3,5,7-8`` (Slurm's task list)."""
    out: list[str] = []
    ordered = sorted(indices)
    start = prev = ordered[0]
    for i in [*ordered[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(f"{start}-{prev}" if prev > start else f"{start}")
        if i is not None:
            start = prev = i
    return ",".join(out)


def fold_pending(jobs: list[Job]) -> list[Job]:
    """One line per array for its pending tasks, where its first pending task was."""
    tasks: dict[str, list[int]] = {}
    for j in jobs:
        if j["state"] == "pending" and j["array_parent"] is not None:
            tasks.setdefault(j["array_parent"], []).append(j["array_index"] or 0)
    out: list[Job] = []
    for j in jobs:
        parent = j["array_parent"]
        if j["state"] != "pending" or parent is None:
            out.append(j)
        elif parent in tasks:  # the first of its pending tasks: the array's line
            spec = j.get("array") or ""
            limit = f"%{spec.rpartition('%')[2]}" if "%" in spec else ""
            indices = tasks.pop(parent)
            shown = f"{parent}_{indices[0]}" if len(indices) == 1 and not limit else (
                f"{parent}_[{ranges(indices)}{limit}]")  # fmt: skip
            out.append({**j, "id": shown})
    return out
