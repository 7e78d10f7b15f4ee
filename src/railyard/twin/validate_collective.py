"""Check the collective model against published nccl-tests results (perf_reference.csv).

Each ``kind == "collective"`` row names a GPU, a node count and a NIC setup; we build the
smallest blueprint that matches it, predict the row's quantity with the same constants as for
every other row, and report the relative error. Nothing here is tuned to a row.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from railyard.twin.collective import ALGOS, CollectiveModel
from railyard.twin.reference import net_stack_of, reference_blueprint

LARGE_BYTES = 8 << 30  # rows whose size is "large" are read as 8 GiB


@dataclass(frozen=True)
class ValidationResult:
    """Published against predicted for one reference row."""

    row_id: str
    op: str
    nodes: int
    gpus_per_node: int
    size_bytes: int
    published_gbyte_s: float
    predicted_gbyte_s: float
    algo: str
    protocol: str

    @property
    def error_pct(self) -> float:
        return 100 * (self.predicted_gbyte_s - self.published_gbyte_s) / self.published_gbyte_s

    @property
    def within_10pct(self) -> bool:
        return abs(self.error_pct) <= 10


def read_reference(path: str | Path) -> list[dict[str, str]]:
    """Rows of a perf_reference.csv file as dictionaries."""
    with Path(path).open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def validate_collectives(rows: list[dict[str, str]]) -> list[ValidationResult]:
    """One result per collective row, in file order."""
    out: list[ValidationResult] = []
    models: dict[tuple[str, str, int], CollectiveModel] = {}
    for row in rows:
        if row.get("kind") != "collective":
            continue
        nodes = _first_int(row["nodes"])
        gpus_per_node = _first_int(row["gpus"]) // nodes
        words = row["quantity"].split()
        pinned = [w for w in words[1:] if w in ALGOS]  # e.g. "all_reduce busbw nvls"
        op, algo = words[0], (pinned[0] if pinned else None)
        size = _size_bytes(row["params"])
        key = (row["gpu"], row["fabric"], nodes)
        if key not in models:
            models[key] = CollectiveModel(reference_blueprint(row), stack=net_stack_of(row))
        model = models[key]
        predicted = model.busbw_gbyte_s(op, size, nodes, gpus_per_node, algo=algo)
        chosen, proto = model.choice(op, size, nodes, gpus_per_node, algo=algo)
        out.append(
            ValidationResult(
                row_id=row["id"],
                op=op,
                nodes=nodes,
                gpus_per_node=gpus_per_node,
                size_bytes=size,
                published_gbyte_s=_value(row["value"]),
                predicted_gbyte_s=predicted,
                algo=chosen,
                protocol=proto,
            )
        )
    return out


def _first_int(text: str) -> int:
    match = re.search(r"\d+", text)
    if match is None:
        raise ValueError(f"no number in '{text}'")
    return int(match.group())


def _value(text: str) -> float:
    """A number, or the midpoint of a range such as ``365-370``."""
    parts = [float(p) for p in re.findall(r"\d+(?:\.\d+)?", text)]
    return sum(parts) / len(parts)


def _size_bytes(params: str) -> int:
    """``size=N``, ``size=A..B`` (the upper end: ceilings are measured there) or ``large``."""
    match = re.search(r"size=([^;]*)", params)
    if match is None or "large" in match.group(1):
        return LARGE_BYTES
    return int(match.group(1).split("..")[-1])
