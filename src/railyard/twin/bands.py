"""Error bands: how far ``railyard perf validate`` found each kind of prediction from published
figures, so every prediction can be printed with the model's known error beside it.

The bands are computed from the shipped reference table and stored in
``data/error_bands.json`` (``railyard perf validate --write-bands`` rewrites it; a test checks
that it matches the table). Errors are ``(predicted - published) / published``, grouped by kind:
training throughput per GPU model, collective bus bandwidth on one node or across nodes,
memory, kernels.

A band is a calibrated interval with a stated coverage (80%): the median error plus or minus
the conformal width of railyard.twin.sources, where each source is scored against a median
made without it. It says where a new source's figure should fall, which the range of errors
seen does not: held out, a min-max band covered only half of a new source's multi-node
collectives. A kind whose rows come from too few sources for that coverage shows the range
seen, and says so.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from railyard.twin.sources import calibrated_half_width, source_key
from railyard.twin.validate_train import ValidationResult

BANDS_FILE = "error_bands.json"
MOE_BAND = "training (mixture of experts)"
MOE_LAYER_BAND = "kernel (mixture-of-experts layer)"
SHIPPED_COVERAGE = 0.8
# Fewer sources than this make no interval: with two, each is scored against the other alone,
# and the "80%" would rest on one comparison each way.
MIN_SOURCES = 3


@dataclass(frozen=True, slots=True)
class Band:
    """Relative errors of one kind of prediction against published figures, and the interval
    a new figure of that kind should fall in (`half_width` None: too few sources for one)."""

    kind: str
    rows: int
    low: float
    high: float
    median: float
    sources: int = 0
    coverage: float = SHIPPED_COVERAGE
    half_width: float | None = None

    @property
    def interval(self) -> tuple[float, float]:
        """The calibrated interval, or the range seen when there is none."""
        if self.half_width is None:
            return self.low, self.high
        return self.median - self.half_width, self.median + self.half_width

    def describe(self, quantity: str = "throughput") -> str:
        """e.g. ``perf validate: training on H100 throughput +0% to +31% of published (80%
        interval from 4 sources; seen -18% to +31%, median +15%, 17 rows)``."""
        lo, hi = self.interval
        where = f"perf validate: {self.kind} {quantity} {lo:+.0%} to {hi:+.0%} of published"
        seen = f"median {self.median:+.0%}, {self.rows} rows"
        if self.half_width is None:
            return (f"{where} (the range seen, {seen}, from {self.sources} source(s): too few "
                    f"for a {self.coverage:.0%} interval)")  # fmt: skip
        return (f"{where} ({self.coverage:.0%} interval from {self.sources} sources; seen "
                f"{self.low:+.0%} to {self.high:+.0%}, {seen})")  # fmt: skip

    def expected_time_s(self, predicted_s: float) -> float | None:
        """The step time the published runs imply, the interval's center: a throughput the model
        over-predicts by the median error e takes 1 + e times the predicted time. None where
        the band is only the range seen (too few sources to judge a center held out)."""
        if self.half_width is None:
            return None
        return predicted_s * (1 + self.median)

    def time_range(self, predicted_s: float) -> tuple[float, float]:
        """The step time the published runs imply: a throughput over-predicted by e means a
        time under-predicted by 1/(1+e)."""
        lo, hi = self.interval
        return predicted_s * (1 + lo), predicted_s * (1 + hi)


def band_keys(check: ValidationResult, row: Mapping[str, str]) -> list[str]:
    """The bands a figure counts in: its kind, and training per GPU model or collectives on
    one node or across nodes (a yes/no memory row counts in none)."""
    if check.kind == "memory" and check.unit == "fits":
        return []
    if check.kind == "training" and "experts=" in row.get("params", ""):
        # mixture-of-experts runs have their own costs (router, permutes, all-to-all,
        # imbalance) and are their own kind; they would blur the dense bands
        return [MOE_BAND]
    if check.kind == "kernel" and "op=moe_layer" in row.get("params", ""):
        # one whole MoE layer with its all-to-all, not a single-GPU kernel
        return [MOE_LAYER_BAND]
    keys = [check.kind]
    if check.kind == "training":
        keys.append(f"training on {row.get('gpu', '?')}")
    elif check.kind == "collective":
        nodes = row.get("nodes", "1").strip()
        keys.append("collective on one node" if nodes == "1" else "collective across nodes")
    return keys


def errors_by_source(
    checks: Sequence[ValidationResult], rows: Sequence[Mapping[str, str]]
) -> dict[str, dict[str, list[float]]]:
    """Band key -> source -> the relative errors of that source's figures."""
    by_id = {r["id"]: r for r in rows}
    groups: dict[str, dict[str, list[float]]] = {}
    for c in checks:
        row = by_id.get(c.row_id.split(".")[0], {})
        source = source_key(row, by_id)
        for key in band_keys(c, row):
            groups.setdefault(key, {}).setdefault(source, []).append(c.error)
    return groups


def compute_bands(
    checks: Sequence[ValidationResult],
    rows: Sequence[Mapping[str, str]],
    coverage: float = SHIPPED_COVERAGE,
) -> dict[str, Band]:
    """Bands by kind from validation results and the table they came from."""
    bands = {}
    for key, by_source in sorted(errors_by_source(checks, rows).items()):
        errors = [e for es in by_source.values() for e in es]
        enough = len(by_source) >= MIN_SOURCES
        bands[key] = Band(
            key, len(errors), min(errors), max(errors), statistics.median(errors),
            len(by_source), coverage,
            calibrated_half_width(by_source, coverage) if enough else None,
        )  # fmt: skip
    return bands


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


def band_for(kind: str, gpu: str | None = None, *, moe: bool = False) -> Band | None:
    """The most specific shipped band: a mixture-of-experts run's own, per GPU model when
    there is one, else the kind's."""
    bands = shipped_bands()
    if moe and kind == "training" and MOE_BAND in bands:
        return bands[MOE_BAND]
    if gpu is not None and f"{kind} on {gpu}" in bands:
        return bands[f"{kind} on {gpu}"]
    return bands.get(kind)


__all__ = [
    "MIN_SOURCES",
    "MOE_BAND",
    "MOE_LAYER_BAND",
    "SHIPPED_COVERAGE",
    "Band",
    "band_for",
    "band_keys",
    "compute_bands",
    "errors_by_source",
    "shipped_bands",
    "write_bands",
]
