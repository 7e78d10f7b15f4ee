"""Draw a built fabric as SVG, so people can see what a blueprint cables up.

Tiers are horizontal rows (super-spines on top, nodes at the bottom); each scalable unit gets
a column with a light background holding its leaves, its own spines and its nodes, while
switches shared by every unit (super-spines, two-tier spines) spread over the full width.
Parallel cables between the same two boxes are drawn once, wider the more cables they stand
for (log scale), and lines of one colour and width go into a single ``<path>`` to keep files
small. Past a few hundred nodes or ~10k lines each unit's nodes collapse into one box, with
one line per (unit, leaf), so even a 16k-GPU fabric stays around a megabyte.

Output is plain SVG 1.1 built as text (no dependencies), deterministic for a given fabric.
Every switch is a ``<rect data-switch="name" data-tier="leaf">`` and every node a ``<rect
data-node="name">`` (``data-nodes="count" data-su="su3"`` when collapsed); each has a
``<title>`` child so viewers show the full name and role on hover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import numpy.typing as npt

from railyard.client.hostlists import compress_hostlist
from railyard.fabric.model import Fabric, Tier

MAX_NODES_DRAWN = 600
MAX_LINES_DRAWN = 10_000

_TIER_COLOURS = {
    Tier.HOST: "#8a96a3",
    Tier.LEAF: "#2e9e6b",
    Tier.SPINE: "#2f6fb5",
    Tier.SUPER_SPINE: "#8a4fb5",
}
_NODE_FILL = "#5f6b78"
_SU_FILLS = ("#eef3f9", "#f6f2ea")

_MARGIN = 24
_LABEL_COL = 86  # left column with the row names
_SW_W, _SW_PITCH = 14, 20
_NODE_W, _NODE_PITCH = 10, 13
_NODE_COLS_MAX = 36
_ROW_GAP = 150  # vertical room for the lines between two rows
_SU_PAD = 8
_SU_GAP = 16
_SU_LABEL_H = 34
_CHAR = 0.6  # monospace advance per unit of font size


def _text_w(text: str, size: float) -> float:
    return len(text) * size * _CHAR


def _num(x: float) -> str:
    """Coordinates to one decimal, without a trailing .0, so output is short and stable."""
    r = round(x, 1)
    return str(int(r)) if r == int(r) else f"{r:.1f}"


def _width_for(count: int) -> float:
    """Stroke width for ``count`` parallel cables: log scale so bundles of 64 stay drawable."""
    return round(min(6.0, 0.8 + 0.9 * math.log2(count)), 1)


@dataclass
class _Box:
    """Where one drawn element sits: centre x, top and bottom y."""

    x: float
    top: float
    bottom: float
    half: float = 0.0  # half width, kept for the wide unit boxes of a collapsed drawing


@dataclass
class _Unit:
    """One scalable unit's column."""

    su: int
    left: float
    width: float
    leaves: list[int]
    spines: list[int]
    nodes: list[int]
    cols: int
    rows: int


def render_svg(fabric: Fabric, *, title: str) -> str:
    """The fabric as an SVG document (a string), readable up to a few hundred nodes."""
    return _Renderer(fabric, title).render()


class _Renderer:
    """One drawing: aggregate links first (that decides whether nodes collapse), then lay out."""

    def __init__(self, fabric: Fabric, title: str) -> None:
        self.f = fabric
        self.title = title
        self.out: list[str] = []
        n_nodes = len(fabric.nodes)
        self.host_pairs, self.host_counts = self._pairs(collapsed=False)
        self.switch_pairs, self.switch_counts = self._switch_pairs()
        drawn = self.host_pairs.shape[0] + self.switch_pairs.shape[0]
        self.collapsed = n_nodes > MAX_NODES_DRAWN or drawn > MAX_LINES_DRAWN
        if self.collapsed:
            self.host_pairs, self.host_counts = self._pairs(collapsed=True)

    # ----------------------------------------------------------------- link aggregation
    def _vertex_element(self, collapsed: bool) -> npt.NDArray[np.int64]:
        """Drawn element of every vertex: node (or its unit's box), then switches."""
        f = self.f
        nics = np.diff(f.node_nic_offset).astype(np.int64)
        owner = np.repeat(np.arange(len(f.nodes), dtype=np.int64), nics)
        if collapsed:
            su = np.array([n.su for n in f.nodes], dtype=np.int64)
            owner = su[owner] if owner.size else owner
        switches = len(f.nodes) + np.arange(len(f.switches), dtype=np.int64)
        return np.concatenate([owner, switches])

    def _pairs(self, collapsed: bool) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Unique (lower element, upper switch element) host links and their cable counts."""
        f = self.f
        element = self._vertex_element(collapsed)
        host = f.link_lo < f.num_endpoints
        return _unique_pairs(element[f.link_lo[host]], element[f.link_hi[host]])

    def _switch_pairs(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        f = self.f
        up = f.link_lo >= f.num_endpoints
        base = f.num_endpoints
        return _unique_pairs(
            f.link_lo[up].astype(np.int64) - base, f.link_hi[up].astype(np.int64) - base
        )

    # ----------------------------------------------------------------------- layout
    def _layout(self) -> None:
        f = self.f
        tiers = sorted({s.tier for s in f.switches}, reverse=True)
        self.tiers = tiers
        self.units: list[_Unit] = []
        by_su: dict[int, _Unit] = {}
        for su in range(f.num_sus):
            unit = _Unit(su, 0.0, 0.0, [], [], [], 1, 1)
            by_su[su] = unit
            self.units.append(unit)
        self.global_rows: dict[Tier, list[int]] = {t: [] for t in tiers}
        for s in f.switches:
            if s.su is not None and s.su in by_su and s.tier == Tier.LEAF:
                by_su[s.su].leaves.append(s.index)
            elif s.su is not None and s.su in by_su and s.tier == Tier.SPINE:
                by_su[s.su].spines.append(s.index)
            else:
                self.global_rows[s.tier].append(s.index)
        for node in f.nodes:
            by_su[node.su].nodes.append(node.index)
        # Row heights follow the longest label so vertical text fits its box.
        self.sw_font = 9.0
        self.node_font = 8.0
        self.row_h: dict[Tier, float] = {
            t: 10 + max(_text_w(s.name, self.sw_font) for s in f.switches if s.tier == t)
            for t in tiers
        }
        longest_node = max((len(n.name) for n in f.nodes), default=4)
        self.node_h = 8 + longest_node * self.node_font * _CHAR
        # Unit widths.
        x = 0.0
        for unit in self.units:
            switch_w = max(len(unit.leaves), len(unit.spines), 1) * _SW_PITCH
            label_w = max(_text_w(self._unit_caption(unit)[1], 10), 40)
            if self.collapsed:
                unit.cols, unit.rows = 1, 1
                nodes_w = 0.0
            else:
                n = max(1, len(unit.nodes))
                cols = min(n, max(int(switch_w // _NODE_PITCH), _NODE_COLS_MAX))
                unit.rows = math.ceil(n / cols)
                unit.cols = math.ceil(n / unit.rows)
                nodes_w = unit.cols * _NODE_PITCH
            unit.width = max(switch_w, nodes_w, label_w) + 2 * _SU_PAD
            unit.left = x
            x += unit.width + _SU_GAP
        band_w = x - _SU_GAP
        widest_global = max((len(v) for v in self.global_rows.values()), default=0)
        self.content_w = max(band_w, widest_global * _SW_PITCH, self._header_w() - _LABEL_COL)
        shift = _MARGIN + _LABEL_COL + (self.content_w - band_w) / 2
        for unit in self.units:
            unit.left += shift
        self.left: float = _MARGIN + _LABEL_COL
        # Rows from the top: title and legend, switch tiers, then nodes.
        legend_lines = len(tiers) + 3
        y: float = _MARGIN + 46 + legend_lines * 16 + 24
        self.row_top: dict[Tier, float] = {}
        for t in tiers:
            self.row_top[t] = y
            y += self.row_h[t] + _ROW_GAP
        self.nodes_top = y
        max_rows = max((u.rows for u in self.units), default=1)
        self.nodes_h = 36.0 if self.collapsed else max_rows * (self.node_h + 4) - 4
        self.height = self.nodes_top + self.nodes_h + _SU_LABEL_H + _MARGIN
        self.width = self.left + self.content_w + _MARGIN
        self._place()

    def _place(self) -> None:
        """Centre x and top/bottom y of every drawn element (nodes or unit boxes, switches)."""
        f = self.f
        n_el = (len(self.units) if self.collapsed else len(f.nodes)) + len(f.switches)
        self.boxes: list[_Box] = [_Box(0.0, 0.0, 0.0) for _ in range(n_el)]
        switch_base = len(self.units) if self.collapsed else len(f.nodes)
        for unit in self.units:
            inner_left = unit.left + _SU_PAD
            inner_w = unit.width - 2 * _SU_PAD
            for row, tier in ((unit.leaves, Tier.LEAF), (unit.spines, Tier.SPINE)):
                for i, s in enumerate(row):
                    cx = inner_left + (i + 0.5) * inner_w / len(row)
                    top = self.row_top[tier]
                    self.boxes[switch_base + s] = _Box(cx, top, top + self.row_h[tier])
            if self.collapsed:
                self.boxes[unit.su] = _Box(
                    unit.left + unit.width / 2,
                    self.nodes_top,
                    self.nodes_top + self.nodes_h,
                    unit.width / 2 - _SU_PAD,
                )
                continue
            grid_w = unit.cols * _NODE_PITCH
            grid_left = unit.left + (unit.width - grid_w) / 2
            for k, node in enumerate(unit.nodes):
                r, c = divmod(k, unit.cols)
                top = self.nodes_top + r * (self.node_h + 4)
                cx = grid_left + (c + 0.5) * _NODE_PITCH
                self.boxes[node] = _Box(cx, top, top + self.node_h)
        for tier, row in self.global_rows.items():
            for i, s in enumerate(row):
                cx = self.left + (i + 0.5) * self.content_w / len(row)
                top = self.row_top[tier]
                self.boxes[switch_base + s] = _Box(cx, top, top + self.row_h[tier])

    def _header_w(self) -> float:
        """Width the title, summary and legend need, so a small fabric does not clip them."""
        lines = [_text_w(self.title, 18) * 1.1, _text_w(self._summary(), 12)]
        lines += [22 + _text_w(text, 12) for _, text in self._legend_entries()]
        return max(lines)

    def _summary(self) -> str:
        f = self.f
        gpus = sum(n.gpus for n in f.nodes)
        return (
            f"{f.design.value} \u00b7 {len(f.nodes)} nodes \u00b7 {gpus} GPUs \u00b7 "
            f"{f.num_sus} scalable unit{'s' if f.num_sus != 1 else ''} \u00b7 "
            f"{len(f.switches)} switches \u00b7 {f.num_links} cables"
        )

    def _legend_entries(self) -> list[tuple[str, str]]:
        f = self.f
        entries: list[tuple[str, str]] = []
        for row in sorted(f.tiers, key=lambda t: t.tier, reverse=True):
            text = f"{row.tier.label}: {row.switches} \u00d7 {row.model}"
            entries.append(
                (_TIER_COLOURS[row.tier], f"{text} ({row.ports_used}/{row.ports} ports used)")
            )
        node_line = f"node: {len(f.nodes)}"
        if self.collapsed:
            node_line += " (drawn as one box per scalable unit)"
        entries.append((_NODE_FILL, node_line))
        entries.append((_SU_FILLS[0], "scalable unit (background)"))
        return entries

    def _unit_caption(self, unit: _Unit) -> tuple[str, str]:
        names = [self.f.nodes[i].name for i in unit.nodes]
        return f"su{unit.su} \u00b7 {len(names)} nodes", compress_hostlist(names)

    # ----------------------------------------------------------------------- drawing
    def render(self) -> str:
        self._layout()
        w, h = _num(self.width), _num(self.height)
        self.out.append(
            f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace">'
        )
        self.out.append(f"<title>{escape(self.title)}</title>")
        self.out.append(
            "<style>"
            ".sw{stroke:#ffffff;stroke-width:0.6}"
            ".nd{fill:" + _NODE_FILL + ";stroke:#ffffff;stroke-width:0.5}"
            ".vl{fill:#ffffff;font-size:9px}"
            ".nl{fill:#ffffff;font-size:8px}"
            ".rl{fill:#46505a;font-size:12px;font-weight:bold}"
            ".lg{fill:#26303a;font-size:12px}"
            ".ln{fill:none;stroke-linecap:round}"
            "</style>"
        )
        self.out.append(f'<rect width="{w}" height="{h}" fill="#ffffff"/>')
        self._draw_units()
        self._draw_links()
        self._draw_switches()
        self._draw_nodes()
        self._draw_header()
        self.out.append("</svg>")
        return "\n".join(self.out) + "\n"

    def _draw_units(self) -> None:
        # The unit background reaches up to its own spines when it has some, else its leaves.
        top_tier = Tier.SPINE if any(u.spines for u in self.units) else Tier.LEAF
        top = self.row_top.get(top_tier, self.nodes_top) - 12
        bottom = self.nodes_top + self.nodes_h + _SU_LABEL_H
        for unit in self.units:
            fill = _SU_FILLS[unit.su % 2]
            head, names = self._unit_caption(unit)
            self.out.append(
                f'<rect data-unit="su{unit.su}" x="{_num(unit.left)}" y="{_num(top)}" '
                f'width="{_num(unit.width)}" height="{_num(bottom - top)}" rx="6" fill="{fill}"/>'
            )
            cx = _num(unit.left + unit.width / 2)
            y1 = self.nodes_top + self.nodes_h + 14
            self.out.append(
                f'<text x="{cx}" y="{_num(y1)}" text-anchor="middle" font-size="11px" '
                f'font-weight="bold" fill="#26303a">{escape(head)}</text>'
            )
            self.out.append(
                f'<text x="{cx}" y="{_num(y1 + 13)}" text-anchor="middle" font-size="10px" '
                f'fill="#46505a">{escape(names)}</text>'
            )
        for tier in self.tiers:
            self._row_label(tier.label, self.row_top[tier] + self.row_h[tier] / 2)
        self._row_label("nodes", self.nodes_top + self.nodes_h / 2)

    def _row_label(self, text: str, y: float) -> None:
        self.out.append(f'<text class="rl" x="{_MARGIN}" y="{_num(y + 4)}">{escape(text)}</text>')

    def _draw_links(self) -> None:
        f = self.f
        base = len(self.units) if self.collapsed else len(f.nodes)
        switch_tier = np.array([int(s.tier) for s in f.switches], dtype=np.int64)
        groups: dict[tuple[int, float], list[str]] = {}
        # Host links: lower end is a node or a unit box.
        for (lo, hi), count in zip(
            self.host_pairs.tolist(), self.host_counts.tolist(), strict=True
        ):
            key = (int(Tier.HOST), _width_for(count))
            groups.setdefault(key, []).append(self._segment(lo, base + hi - len(f.nodes)))
        for (lo, hi), count in zip(
            self.switch_pairs.tolist(), self.switch_counts.tolist(), strict=True
        ):
            key = (int(switch_tier[hi]), _width_for(count))
            groups.setdefault(key, []).append(self._segment(base + lo, base + hi))
        per_tier: dict[int, int] = {}
        for (tier, _), segments in groups.items():
            per_tier[tier] = per_tier.get(tier, 0) + len(segments)
        for (tier, width), segments in sorted(groups.items()):
            colour = _TIER_COLOURS[Tier(tier)]  # the upper end's tier; grey for host cables
            # Lines up to shared switches cross the whole picture: fade them by how many
            # there are per 100 px of width so the boxes stay visible.
            opacity = 0.55
            if tier != Tier.HOST and self.global_rows.get(Tier(tier)):
                density = per_tier[tier] * 100 / self.content_w
                opacity = min(0.55, max(0.12, 1.8 / math.sqrt(density)))
            self.out.append(
                f'<path class="ln" stroke="{colour}" stroke-width="{width}" '
                f'stroke-opacity="{opacity:.2f}" data-cables-tier="{Tier(tier).label}" '
                f'd="{" ".join(segments)}"/>'
            )

    def _segment(self, lower: int, upper: int) -> str:
        a, b = self.boxes[lower], self.boxes[upper]
        # A wide box (a collapsed unit) takes each line straight below its switch.
        ax = min(max(b.x, a.x - a.half + 2), a.x + a.half - 2) if a.half else a.x
        return f"M{_num(ax)} {_num(a.top)}L{_num(b.x)} {_num(b.bottom)}"

    def _draw_switches(self) -> None:
        f = self.f
        base = len(self.units) if self.collapsed else len(f.nodes)
        for s in f.switches:
            box = self.boxes[base + s.index]
            x = box.x - _SW_W / 2
            h = box.bottom - box.top
            role = f"{s.tier.label} {s.model}"
            if s.su is not None and s.tier != Tier.SUPER_SPINE:
                role += f", su{s.su}"
            if s.rail is not None:
                role += f", rail {s.rail}"
            self.out.append(
                f'<rect class="sw" data-switch={quoteattr(s.name)} data-tier="{s.tier.label}" '
                f'x="{_num(x)}" y="{_num(box.top)}" width="{_SW_W}" height="{_num(h)}" rx="2" '
                f'fill="{_TIER_COLOURS[s.tier]}"><title>{escape(f"{s.name}: {role}")}</title>'
                "</rect>"
            )
            tx, ty = _num(box.x + 3), _num(box.bottom - 5)
            self.out.append(
                f'<text class="vl" x="{tx}" y="{ty}" transform="rotate(-90 {tx} {ty})">'
                f"{escape(s.name)}</text>"
            )

    def _draw_nodes(self) -> None:
        f = self.f
        if self.collapsed:
            for unit in self.units:
                box = self.boxes[unit.su]
                w = unit.width - 2 * _SU_PAD
                gpus = sum(f.nodes[i].gpus for i in unit.nodes)
                label = f"{len(unit.nodes)} nodes \u00b7 {gpus} GPUs"
                self.out.append(
                    f'<rect class="nd" data-su="su{unit.su}" data-nodes="{len(unit.nodes)}" '
                    f'x="{_num(box.x - w / 2)}" y="{_num(box.top)}" width="{_num(w)}" '
                    f'height="{_num(self.nodes_h)}" rx="3"><title>'
                    f"{escape(self._unit_caption(unit)[1])}</title></rect>"
                )
                self.out.append(
                    f'<text x="{_num(box.x)}" y="{_num(box.top + self.nodes_h / 2 + 4)}" '
                    f'text-anchor="middle" font-size="11px" fill="#ffffff">{escape(label)}</text>'
                )
            return
        for node in f.nodes:
            box = self.boxes[node.index]
            x = box.x - _NODE_W / 2
            tip = f"{node.name}: {node.group}, {node.gpus} GPUs, {node.nics} NICs, su{node.su}"
            self.out.append(
                f'<rect class="nd" data-node={quoteattr(node.name)} x="{_num(x)}" '
                f'y="{_num(box.top)}" width="{_NODE_W}" height="{_num(self.node_h)}" rx="2">'
                f"<title>{escape(tip)}</title></rect>"
            )
            tx, ty = _num(box.x + 3), _num(box.bottom - 4)
            self.out.append(
                f'<text class="nl" x="{tx}" y="{ty}" transform="rotate(-90 {tx} {ty})">'
                f"{escape(node.name)}</text>"
            )

    def _draw_header(self) -> None:
        x = _MARGIN
        y = _MARGIN + 16
        self.out.append(
            f'<text x="{x}" y="{y}" font-size="18px" font-weight="bold" fill="#1d252d">'
            f"{escape(self.title)}</text>"
        )
        self.out.append(
            f'<text x="{x}" y="{y + 20}" font-size="12px" fill="#46505a">'
            f"{escape(self._summary())}</text>"
        )
        y += 46
        entries = self._legend_entries()
        for colour, text in entries:
            self.out.append(
                f'<rect x="{x}" y="{y - 10}" width="14" height="12" rx="2" fill="{colour}" '
                'stroke="#8a96a3" stroke-width="0.5"/>'
            )
            self.out.append(f'<text class="lg" x="{x + 22}" y="{y}">{escape(text)}</text>')
            y += 16
        counts = np.concatenate([self.host_counts, self.switch_counts])
        top = int(counts.max()) if counts.size else 1
        # Powers of two below the largest bundle, then the largest itself: at most five.
        samples = sorted({*[2**k for k in range(4) if 2**k < top], top})
        self.out.append(f'<text class="lg" x="{x}" y="{y}">line width = parallel cables:</text>')
        lx = x + _text_w("line width = parallel cables:", 12) + 12
        for count in samples:
            self.out.append(
                f'<line x1="{_num(lx)}" y1="{y - 4}" x2="{_num(lx + 28)}" y2="{y - 4}" '
                f'stroke="#46505a" stroke-width="{_width_for(count)}"/>'
            )
            self.out.append(f'<text class="lg" x="{_num(lx + 32)}" y="{y}">{count}</text>')
            lx += 40 + _text_w(str(count), 12)


def _unique_pairs(
    lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Distinct (lo, hi) rows in sorted order and how many cables each stands for."""
    if lo.size == 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    pairs = np.stack([lo.astype(np.int64), hi.astype(np.int64)], axis=1)
    unique, counts = np.unique(pairs, axis=0, return_counts=True)
    return unique.astype(np.int64), counts.astype(np.int64)
