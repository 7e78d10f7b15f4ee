"""A job's resource history as CSV, one line per bucket: the same text from the server
(``GET /v1/jobs/{id}/samples?format=csv``) and from ``railyard stats --csv``."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

SERIES = ("gpu_util_pct", "gpu_mem_used_bytes", "gpu_power_w", "gpu_temp_c_max", "cpu_pct",
          "host_mem_bytes")  # fmt: skip


def _cell(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def csv_text(points: Sequence[Mapping[str, Any]], gpus: Sequence[str]) -> str:
    """``t_s``, the job's figures, then each GPU's utilisation (``gpu_util_pct[node:i]``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["t_s", *SERIES, *(f"gpu_util_pct[{g}]" for g in gpus)])
    for p in points:
        figures = [p.get(name) for name in SERIES] + [p["gpus"].get(g) for g in gpus]
        writer.writerow([_cell(p["t_s"]), *(_cell(v) for v in figures)])
    return out.getvalue()
