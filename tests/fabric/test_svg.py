"""The SVG picture: well-formed XML, one box per switch, small enough at 16k GPUs, stable."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import cache

import pytest
from tests.conftest import blueprint

from railyard.blueprint import load
from railyard.fabric.build import build_fabric
from railyard.fabric.model import Fabric
from railyard.fabric.svg import render_svg

SVG = "{http://www.w3.org/2000/svg}"


@cache
def _fabric(preset: str) -> Fabric:
    return build_fabric(load(preset).blueprint)


@cache
def _big() -> Fabric:
    """16,384 GPUs: 2,048 nodes x 8, rail-optimized, 3 tiers of QM9700, 1,024 GPUs per unit."""
    return build_fabric(
        blueprint(nodes=2048, design="rail-optimized", tiers=["QM9700"] * 3, su_gpus=1024)
    )


def _elements(svg: str, attribute: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return [el for el in root.iter() if attribute in el.attrib]


@pytest.mark.parametrize("preset", ["gaggle-h100", "rail-2048", "phy-h100-4x200"])
def test_one_box_per_switch_and_node(preset: str) -> None:
    fabric = _fabric(preset)
    svg = render_svg(fabric, title=f"{preset} fabric")
    switches = _elements(svg, "data-switch")
    assert all(el.tag == f"{SVG}rect" for el in switches)
    assert sorted(el.attrib["data-switch"] for el in switches) == sorted(
        s.name for s in fabric.switches
    )
    tiers = {el.attrib["data-switch"]: el.attrib["data-tier"] for el in switches}
    assert tiers == {s.name: s.tier.label for s in fabric.switches}
    nodes = _elements(svg, "data-node")
    assert [el.attrib["data-node"] for el in nodes] == [n.name for n in fabric.nodes]
    assert len(_elements(svg, "data-unit")) == fabric.num_sus


def test_parallel_cables_drawn_once_and_wider() -> None:
    # gaggle-h100: 6 cables between each rail leaf and each spine, one line per node and leaf.
    fabric = _fabric("gaggle-h100")
    root = ET.fromstring(render_svg(fabric, title="gaggle"))
    paths = [el for el in root.iter(f"{SVG}path") if "data-cables-tier" in el.attrib]
    by_tier: dict[str, list[tuple[float, int]]] = {}
    for path in paths:
        segments = path.attrib["d"].count("M")
        width = float(path.attrib["stroke-width"])
        by_tier.setdefault(path.attrib["data-cables-tier"], []).append((width, segments))
    assert sum(n for _, n in by_tier["host"]) == 12 * 8  # 12 nodes x 8 rail leaves
    assert sum(n for _, n in by_tier["spine"]) == 8 * 2  # 8 leaves x 2 spines
    assert min(w for w, _ in by_tier["spine"]) > max(w for w, _ in by_tier["host"])


def test_title_and_legend_are_escaped() -> None:
    title = 'Rack <A> & "B"'
    root = ET.fromstring(render_svg(_fabric("gaggle-h100"), title=title))
    assert root.find(f"{SVG}title") is not None
    assert root.findtext(f"{SVG}title") == title
    texts = [el.text or "" for el in root.iter(f"{SVG}text")]
    assert title in texts
    assert any("QM9700" in t for t in texts)


def test_deterministic() -> None:
    fabric = _fabric("rail-2048")
    assert render_svg(fabric, title="rail-2048") == render_svg(fabric, title="rail-2048")


def test_16k_gpus_collapse_nodes_and_stay_small() -> None:
    fabric = _big()
    assert len(fabric.nodes) == 2048
    svg = render_svg(fabric, title="16k GPUs")
    assert len(svg.encode()) < 2_000_000
    assert len(_elements(svg, "data-switch")) == len(fabric.switches)
    assert _elements(svg, "data-node") == []
    units = _elements(svg, "data-nodes")
    assert [int(el.attrib["data-nodes"]) for el in units] == [128] * 16
    assert render_svg(fabric, title="16k GPUs") == svg
