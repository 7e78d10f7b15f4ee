"""Where a reference row's figure comes from, and the conformal width made from sources.

Rows of one publication are not independent evidence: a model that is 15% off on one paper's
setup is 15% off on all of its rows. So the twin's error bands are made and judged per source,
never per row. A source is a publication or a repository: rows citing the same paper (by
first author and year, or arXiv id), the same GitHub repository or the same seed article are
one source, and "same as c01" is c01's source.

The calibrated width is split-conformal over sources (Vovk, Gammerman and Shafer, "Algorithmic
Learning in a Random World", 2005; Lei et al., "Distribution-Free Predictive Inference for
Regression", JASA 2018, for the split form): each source's errors are scored against the
median of the other sources' errors, and the width for a stated coverage is the k-th smallest
score, k = ceil(coverage x (n + 1)).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping

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


__all__ = ["calibrated_half_width", "source_key"]
