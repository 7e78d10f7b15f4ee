"""Small figures the pages draw from use-case values (control.usecases): no store reads here."""

from __future__ import annotations


def sparkline(values: list[float], *, label: str, percent: bool = False) -> str:
    """An inline SVG line of `values` (oldest first) with its last value."""
    width, height = 360, 60
    top = max(values) if values and max(values) > 0 else 1.0
    if percent:
        top = 1.0
    step = width / max(1, len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - v / top * (height - 4) - 2:.1f}"
                      for i, v in enumerate(values))  # fmt: skip
    last = values[-1] if values else 0.0
    shown = f"{last:.0%}" if percent else f"{last:.0f}"
    return (
        f"<figure><figcaption>{label}: now {shown} (last 6 h)</figcaption>"
        f'<svg width="{width}" height="{height}" role="img" aria-label="{label}">'
        f'<rect width="{width}" height="{height}" fill="#fff" stroke="#ccc"/>'
        f'<polyline fill="none" stroke="#1d3557" stroke-width="2" points="{points}"/></svg>'
        "</figure>"
    )
