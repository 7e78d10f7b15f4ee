"""Error bands: how far ``railyard perf validate`` found each kind of prediction from published
figures, so every prediction can be printed with the model's known error beside it.

The bands are computed from the shipped reference table and stored in
``data/error_bands.json`` (``railyard perf validate --write-bands`` rewrites it; a test checks
that it matches the table). A band is the range, median and count of the relative errors
``(predicted - published) / published`` of one kind: training throughput per GPU model,
collective bus bandwidth on one node or across nodes, memory, kernels.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from railyard.twin.validate_train import ValidationResult

BANDS_FILE = "error_bands.json"


@dataclass(frozen=True, slots=True)
class Band:
    """Relative errors of one kind of prediction against published figures."""

    kind: str
    rows: int
    low: float
    high: float
    median: float

    def describe(self, quantity: str = "throughput") -> str:
        """e.g. ``perf validate: training on H100 +8% to +31% (median +18%, 17 rows)``."""
        return (
            f"perf validate: {self.kind} {quantity} {self.low:+.0%} to {self.high:+.0%} of "
            f"published (median {self.median:+.0%}, {self.rows} rows)"
        )

    def time_range(self, predicted_s: float) -> tuple[float, float]:
        """The step time the published runs imply: a throughput over-predicted by e means a
        time under-predicted by 1/(1+e)."""
        return predicted_s * (1 + self.low), predicted_s * (1 + self.high)


def _band(kind: str, errors: Sequence[float]) -> Band:
    return Band(kind, len(errors), min(errors), max(errors), statistics.median(errors))


def band_keys(check: ValidationResult, row: Mapping[str, str]) -> list[str]:
    """The bands a figure counts in: its kind, and training per GPU model or collectives on
    one node or across nodes (a yes/no memory row counts in none)."""
    if check.kind == "memory" and check.unit == "fits":
        return []
    keys = [check.kind]
    if check.kind == "training":
        keys.append(f"training on {row.get('gpu', '?')}")
    elif check.kind == "collective":
        nodes = row.get("nodes", "1").strip()
        keys.append("collective on one node" if nodes == "1" else "collective across nodes")
    return keys


def compute_bands(
    checks: Sequence[ValidationResult], rows: Sequence[Mapping[str, str]]
) -> dict[str, Band]:
    """Bands by kind from validation results and the table they came from."""
    by_id = {r["id"]: r for r in rows}
    groups: dict[str, list[float]] = {}
    for c in checks:
        for key in band_keys(c, by_id.get(c.row_id.split(".")[0], {})):
            groups.setdefault(key, []).append(c.error)
    return {k: _band(k, v) for k, v in sorted(groups.items())}


def write_bands(bands: Mapping[str, Band], path: str | Path) -> None:
    data = {k: asdict(b) for k, b in bands.items()}
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def shipped_bands() -> dict[str, Band]:
    """The bands shipped with railyard (empty if the file is missing)."""
    path = resources.files("railyard.data").joinpath(BANDS_FILE)
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {k: Band(**v) for k, v in data.items()}


def band_for(kind: str, gpu: str | None = None) -> Band | None:
    """The most specific shipped band: per GPU model when there is one, else the kind's."""
    bands = shipped_bands()
    if gpu is not None and f"{kind} on {gpu}" in bands:
        return bands[f"{kind} on {gpu}"]
    return bands.get(kind)


__all__ = ["Band", "band_for", "band_keys", "compute_bands", "shipped_bands", "write_bands"]
