"""Pieces the benchmark scripts share: a large cluster to measure on, a timing loop, and
keep-alive clients submitting jobs to a real server."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from benchmarks.rawhttp import RawClient

from railyard.blueprint import Blueprint, load_text

SINGLE = {"command": ["true"], "gpus": 1, "priority": "low"}


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


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[-1] if len(samples) > 1 else float("nan")


def api_client(url: str, token: str, timeout_s: float = 600) -> httpx.Client:
    """A keep-alive client with the bearer token."""
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=url, headers=headers, timeout=timeout_s)


def submit_rate(
    url: str, token: str, jobs: int, clients: int, body: Mapping[str, Any] = SINGLE
) -> tuple[float, list[float]]:
    """Jobs/s for ``jobs`` single submissions (``POST /v1/jobs``) spread over ``clients``
    keep-alive connections (bare HTTP, :mod:`benchmarks.rawhttp`), and every request's
    latency in seconds. A non-201 answer fails the run."""

    def run(count: int) -> list[float]:
        took = []
        with RawClient(url, token, "/v1/jobs", body) as client:
            for _ in range(count):
                began = time.perf_counter()
                status, answer = client.post()
                took.append(time.perf_counter() - began)
                if status != 201:
                    raise RuntimeError(f"submit answered {status}: {answer[:200]!r}")
        return took

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = [t for part in pool.map(run, [jobs // clients] * clients) for t in part]
    return len(latencies) / (time.perf_counter() - start), latencies


def batch_rate(url: str, token: str, jobs: int, per_request: int = 1000) -> float:
    """Jobs/s through ``POST /v1/jobs/batch``, ``per_request`` jobs per request."""
    batch = {"jobs": [SINGLE] * per_request}
    start = time.perf_counter()
    with api_client(url, token) as client:
        for _ in range(jobs // per_request):
            client.post("/v1/jobs/batch", json=batch).raise_for_status()
    return (jobs // per_request * per_request) / (time.perf_counter() - start)
