"""Small figures the pages draw from use-case values (control.usecases): no store reads here.
Inline SVG with its axes written out (the CSP allows no script to draw them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from railyard.web.page import esc

WIDTH, HEIGHT, LEFT, BOTTOM = 420, 110, 44, 18  # plot box and the axes' margins, px


def chart(values: Sequence[float], *, label: str, x_labels: Sequence[str], percent: bool = False,
          bars: bool = False, unit: Callable[[float], str] | None = None,
          latest: str | None = None) -> str:  # fmt: skip
    """A line (or bars) of ``values``, oldest first, with a y axis from 0 to its top (100% for
    percentages) and ``x_labels`` spread under it (first at the left, last at the right);
    ``unit`` writes a value (default: a fraction as a percentage, else a whole number);
    ``latest`` names the last value in the caption (default: now, or today for bars)."""
    top = 1.0 if percent else max([*values, 0.0]) or 1.0
    plot_w, plot_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - 6
    n = max(1, len(values))

    def y(v: float) -> float:
        return 6 + plot_h - min(1.0, v / top) * plot_h

    def fmt(v: float) -> str:
        if unit is not None:
            return unit(v)
        return f"{v:.0%}" if percent else f"{v:,.0f}"

    if bars:
        slot = plot_w / n
        marks = "".join(
            f'<rect x="{LEFT + i * slot + 2:.1f}" y="{y(v):.1f}" width="{max(1.0, slot - 4):.1f}" '
            f'height="{6 + plot_h - y(v):.1f}" fill="#1d3557"><title>{esc(fmt(v))}</title></rect>'
            for i, v in enumerate(values)
        )  # fmt: skip
    else:
        step = plot_w / max(1, n - 1)
        points = " ".join(f"{LEFT + i * step:.1f},{y(v):.1f}" for i, v in enumerate(values))
        marks = f'<polyline fill="none" stroke="#1d3557" stroke-width="2" points="{points}"/>'
    last_i = len(x_labels) - 1
    anchors = [
        "start" if i == 0 else "end" if i == last_i else "middle" for i in range(len(x_labels))
    ]
    ticks = "".join(
        f'<text x="{LEFT + plot_w * i / max(1, last_i):.1f}" y="{HEIGHT - 4}" font-size="10" '
        f'text-anchor="{anchors[i]}">{esc(t)}</text>'
        for i, t in enumerate(x_labels)
    )  # fmt: skip
    axes = (
        f'<line x1="{LEFT}" y1="6" x2="{LEFT}" y2="{6 + plot_h}" stroke="#999"/>'
        f'<line x1="{LEFT}" y1="{6 + plot_h}" x2="{LEFT + plot_w}" y2="{6 + plot_h}" '
        'stroke="#999"/>'
        f'<text x="{LEFT - 4}" y="12" font-size="10" text-anchor="end">{esc(fmt(top))}</text>'
        f'<text x="{LEFT - 4}" y="{6 + plot_h}" font-size="10" text-anchor="end">'
        f'{esc(fmt(0.0))}</text>'
    )  # fmt: skip
    last = fmt(values[-1]) if values else fmt(0.0)
    return (
        f"<figure><figcaption>{esc(label)}: {esc(latest or ('today' if bars else 'now'))} "
        f"{esc(last)}"
        "</figcaption>"
        f'<svg width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{esc(label)}">'
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>{axes}{marks}{ticks}</svg>'
        "</figure>"
    )
