"""Slurm's filename patterns (``--output=train-%j.out``), expanded the same way where a job's
files are opened (``exec.task``) and where they are shown (``railyard show``'s StdOut).
Standard library only, so the CLI pays for nothing else."""

from __future__ import annotations

import re
from collections.abc import Mapping

NO_ARRAY_INDEX = "4294967294"  # what sbatch 22.05 writes for %a in a job that is no array
_PATTERN_RE = re.compile(r"%(\d*)([%AaJjNnstux])")


def expand_pattern(
    pattern: str,
    fields: Mapping[str, str],
    *,
    node: str,
    node_index: int = 0,
    task: int = 0,
    step: str = "batch",
) -> str:
    """Slurm's filename pattern (sbatch(1), "filename pattern"): ``%j`` job id, ``%A`` array
    job id, ``%a`` array index, ``%x`` job name, ``%u`` user, ``%N`` node, ``%n`` node index,
    ``%t`` task, ``%s`` step, ``%J`` job.step, ``%%``; a width pads numbers with zeros
    (``%5j``). ``fields`` holds ``j A a x u``; a missing ``A`` is the job id and a missing
    ``a`` the value sbatch writes for a job that is no array."""
    job = fields.get("j", "")
    values = {
        "%": "%",
        "j": job,
        "A": fields.get("A") or job,
        "a": fields.get("a") or NO_ARRAY_INDEX,
        "x": fields.get("x", ""),
        "u": fields.get("u", ""),
        "N": node,
        "n": str(node_index),
        "t": str(task),
        "s": step,
        "J": job if step == "batch" else f"{job}.{step}",
    }

    def one(match: re.Match[str]) -> str:
        width, key = match.groups()
        value = values[key]
        if width and value.isdigit():
            return value.zfill(int(width))
        return value

    return _PATTERN_RE.sub(one, pattern)
