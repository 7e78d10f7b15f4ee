"""A node's own figures, recorded when it was known good: what its later runs are held to.

Why a baseline and not a catalogue figure: a CPU node's matrix rate or a memory copy depends
on the part, the BIOS, the BLAS and the memory population; what a quiet, healthy run of *this*
node measured is the expectation that catches it getting slower (seed 004 compares each node's
NCCL bus bandwidth with what that node type should reach in the same way).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class BaselineError(ValueError):
    """An unreadable or malformed baseline file; the message names the file."""


@dataclass(frozen=True)
class Baseline:
    node: str
    recorded_t_s: float
    figures: dict[str, float] = field(default_factory=dict)  # check -> figure in its unit

    def source(self) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.recorded_t_s))
        return f"baseline of {self.node} recorded {when}"


def load(path: Path) -> Baseline:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        figures = {str(k): float(v) for k, v in data["figures"].items()}
        return Baseline(str(data["node"]), float(data["recorded_t_s"]), figures)
    except FileNotFoundError:
        raise BaselineError(
            f"{path}: no baseline (hint: record one on a healthy, idle node with "
            "railyard health --record-baseline)"
        ) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BaselineError(f"{path}: not a railyard baseline: {exc}") from None


def save(path: Path, baseline: Baseline) -> None:
    """Written aside and renamed into place, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    body = {
        "node": baseline.node,
        "recorded_t_s": baseline.recorded_t_s,
        "figures": baseline.figures,
    }
    tmp.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
