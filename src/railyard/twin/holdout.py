"""Held-out judgement of the twin against its reference table: leave one source out.

The twin fits nothing on the reference table except its error bands, so the held-out
question is whether a band made without a source's rows covers that source's errors. Per kind
(`bands.band_keys`), each source's rows are judged by bands built from the
other sources' rows only:

- the shipped kind of band, the range (min to max) of the others' errors;
- a calibrated interval for a stated coverage (80% by default), split-conformal style: the
  others' median error plus or minus the k-th smallest of their own leave-one-source-out
  distances to their medians, k = ceil(coverage x (n + 1)) (Vovk, Gammerman and Shafer,
  "Algorithmic Learning in a Random World", 2005; Lei et al., "Distribution-Free Predictive
  Inference for Regression", JASA 2018, for the split form). With too few others it has no
  band and judges nothing.

A source is a publication or a repository: rows citing the same paper (by first author and
year, or arXiv id), the same GitHub repository or the same seed article are one source, and
"same as c01" is c01's source.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from railyard.twin.bands import band_keys
from railyard.twin.validate_train import ValidationResult

_ARXIV = re.compile(r"arXiv[: ]*(\d{4}\.\d{4,5})")
_AUTHOR = re.compile(r"([A-Z][A-Za-z-]+) et al\.?,? (\d{4})")
_REPO = re.compile(r"github\.com/([\w.-]+/[\w.-]+)")
_SEED = re.compile(r"seed (\d{3})")
_SAME = re.compile(r"^same as (\w+)")
_KEYS = ((_AUTHOR, "{0} {1}"), (_ARXIV, "arXiv {0}"), (_REPO, "{0}"), (_SEED, "seed {0}"))


def source_key(row: Mapping[str, str], by_id: Mapping[str, Mapping[str, str]]) -> str:
    """The publication or repository a row's figure comes from."""
    text = row.get("source", "").strip()
    seen = {row.get("id", "")}
    while (same := _SAME.match(text)) and same.group(1) in by_id and same.group(1) not in seen:
        seen.add(same.group(1))
        text = by_id[same.group(1)].get("source", "").strip()
    for pattern, label in _KEYS:
        found = pattern.search(text)
        if found:
            return label.format(*found.groups())
    return text or row.get("id", "?")


@dataclass(frozen=True)
class HeldOut:
    """One kind's held-out figures: errors, and how often bands made without a row's source
    covered it (`judged` rows had enough other sources to make a band from)."""

    kind: str
    rows: int
    sources: int
    mean_abs_error: float
    max_abs_error: float
    judged: int
    range_covered: int
    calibrated_covered: int
    coverage: float  # the calibrated interval's stated coverage

    @property
    def range_coverage(self) -> float | None:
        return self.range_covered / self.judged if self.judged else None

    @property
    def calibrated_coverage(self) -> float | None:
        return self.calibrated_covered / self.judged if self.judged else None


def calibrated_half_width(by_source: Mapping[str, list[float]], coverage: float) -> float | None:
    """The conformal half-width around the median: each source's errors scored against the
    median of the others', the k-th smallest score (None: too few scores for `coverage`)."""
    scores = []
    for source, errors in by_source.items():
        others = [e for s, es in by_source.items() if s != source for e in es]
        if others:
            center = statistics.median(others)
            scores += [abs(e - center) for e in errors]
    k = math.ceil(coverage * (len(scores) + 1))
    if not scores or k > len(scores):
        return None
    return sorted(scores)[k - 1]


def held_out(
    checks: Sequence[ValidationResult], rows: Sequence[Mapping[str, str]], coverage: float = 0.8
) -> list[HeldOut]:
    """Per kind, leave-one-source-out: each source judged by bands from the others."""
    by_id = {r["id"]: r for r in rows}
    groups: dict[str, dict[str, list[float]]] = {}
    for c in checks:
        row = by_id.get(c.row_id.split(".")[0], {})
        source = source_key(row, by_id)
        for kind in band_keys(c, row):
            groups.setdefault(kind, {}).setdefault(source, []).append(c.error)
    out = []
    for kind, by_source in sorted(groups.items()):
        errors = [e for es in by_source.values() for e in es]
        judged = range_in = calibrated_in = 0
        for source, mine in by_source.items():
            others = {s: es for s, es in by_source.items() if s != source}
            pooled = [e for es in others.values() for e in es]
            width = calibrated_half_width(others, coverage) if len(others) >= 2 else None
            if len(pooled) < 2 or width is None:
                continue
            center = statistics.median(pooled)
            for e in mine:
                judged += 1
                range_in += min(pooled) <= e <= max(pooled)
                calibrated_in += abs(e - center) <= width
        mean_abs = statistics.fmean(abs(e) for e in errors)
        max_abs = max(abs(e) for e in errors)
        sources = len(by_source)
        out.append(HeldOut(kind, len(errors), sources, mean_abs, max_abs, judged, range_in,
                           calibrated_in, coverage))  # fmt: skip
    return out


__all__ = ["HeldOut", "calibrated_half_width", "held_out", "source_key"]
