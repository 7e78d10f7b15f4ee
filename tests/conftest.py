"""Shared helpers: tiny blueprints written inline, so each test states its cluster as data."""

from __future__ import annotations

import textwrap

import pytest

from railyard.blueprint import Blueprint, load_text


def blueprint(
    *,
    nodes: int,
    design: str,
    tiers: list[str],
    gpus: int = 8,
    nics: int = 8,
    nic_gbit_s: int = 400,
    su_gpus: int | None = None,
    oversubscription: float = 1.0,
) -> Blueprint:
    """A one-group blueprint of ``nodes`` identical GPU servers on the given fabric."""
    tier_lines = "\n".join(
        f"    - {{switch: {t}, oversubscription: {oversubscription}}}" for t in tiers
    )
    su = f"  scalable_unit_gpus: {su_gpus}\n" if su_gpus else ""
    text = textwrap.dedent(
        f"""\
        name: test
        node_types:
          box:
            gpu: H100-SXM-80GB
            gpus: {gpus}
            nvlink_domain_gpus: {gpus}
            nics: {{count: {nics}, speed_gbit_s: {nic_gbit_s}}}
            power_w: 10000
        node_groups:
          n: {{node_type: box, count: {nodes}, hostname_prefix: n}}
        """
    )
    text += f"fabric:\n  design: {design}\n{su}  tiers:\n{tier_lines}\n"
    return load_text(text, file="test.yaml").blueprint


@pytest.fixture
def make_blueprint() -> object:
    return blueprint
