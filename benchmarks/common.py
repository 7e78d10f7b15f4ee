"""Pieces the benchmark scripts share: a large cluster to measure on and a timing loop."""

from __future__ import annotations

import time
from collections.abc import Callable

from railyard.blueprint import Blueprint, load_text


def rail_optimized(gpus: int, switch: str = "QM9700", su_gpus: int = 1024) -> Blueprint:
    """An HGX H100 cluster of ``gpus`` GPUs on a 3-tier rail-optimized fabric."""
    text = f"""
name: rail-{gpus}
node_types:
  hgx: {{gpu: H100-SXM-80GB, gpus: 8, nvlink_domain_gpus: 8,
         nics: {{count: 8, speed_gbit_s: 400}}, power_w: 10200, price_usd: 300000}}
node_groups:
  gpu: {{node_type: hgx, count: {gpus // 8}}}
fabric:
  design: rail-optimized
  scalable_unit_gpus: {su_gpus}
  tiers: [{{switch: {switch}}}, {{switch: {switch}}}, {{switch: {switch}}}]
"""
    return load_text(text, file=f"rail-{gpus}").blueprint


def time_runs(fn: Callable[[], object], repeat: int) -> list[float]:
    """Wall seconds of ``repeat`` calls after one warm-up call (``time.perf_counter``)."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples
