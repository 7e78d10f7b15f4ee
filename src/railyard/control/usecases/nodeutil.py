"""A node's GPU utilisation over a range (the dashboard's node page), from the sampler's
readings of running jobs' GPUs (`control.metrics.sampler`, ``job_samples``): per bucket, the
mean over every GPU of the node of each GPU's readings there, a GPU with none (no job on it)
counted as 0; and each GPU's mean over the buckets. Through the (node, t_s) index: one
node's readings only. A node's GPUs and state are public (the fabric map shows them); no
job is named here."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Integer, cast, func, select
from sqlalchemy.orm import Session

from railyard.control.errors import NotFound
from railyard.control.store.tables import NodeRow, SampleRow

BUCKETS = 36


@dataclass(frozen=True)
class NodeUtil:
    node: str
    state: str
    flavor: str
    gpus: int
    utilization: list[float]  # per bucket, oldest first, 0..1 over all the node's GPUs
    by_gpu: dict[int, float]  # each GPU's mean over the range, 0..1 (idle ticks as 0)
    readings: int


def node_utilization(session: Session, name: str, now_t_s: float, span_s: float) -> NodeUtil:
    node = session.get(NodeRow, name)
    if node is None:
        raise NotFound(f"no node {name[:64]!r}")
    since = now_t_s - span_s
    width = span_s / BUCKETS
    bucket = cast((SampleRow.t_s - since) / width, Integer)
    rows = session.execute(
        select(bucket, SampleRow.gpu, func.avg(SampleRow.gpu_util_pct), func.count())
        .where(SampleRow.node == name, SampleRow.t_s > since, SampleRow.t_s <= now_t_s,
               SampleRow.gpu.is_not(None), SampleRow.gpu_util_pct.is_not(None))
        .group_by(bucket, SampleRow.gpu)
    ).all()  # fmt: skip
    gpus = max(1, node.gpus)
    per_bucket = [0.0] * BUCKETS
    sums: dict[int, float] = {}
    seen = 0
    for b, gpu, mean, count in rows:
        at = min(BUCKETS - 1, max(0, int(b)))
        per_bucket[at] += float(mean or 0.0) / 100.0 / gpus
        sums[int(gpu)] = sums.get(int(gpu), 0.0) + float(mean or 0.0) / 100.0
        seen += int(count)
    return NodeUtil(
        node.name, node.state, node.flavor, node.gpus,
        [min(1.0, u) for u in per_bucket],
        {g: min(1.0, sums.get(g, 0.0) / BUCKETS) for g in range(node.gpus)}, seen,
    )  # fmt: skip
