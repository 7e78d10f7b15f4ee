"""A job's resource history (`control.metrics.sampler`'s rows), bucketed for a graph or an
export: at most ``points`` buckets over the job's samples, each the mean of what fell in it.

Across GPUs a bucket holds what a user asks of the whole job: mean utilisation, summed
memory and power, the hottest GPU; across nodes, summed host CPU and memory. Each GPU's
utilisation comes too (``gpus``), as the Ray dashboard lists it per device.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import Integer, cast, func, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from railyard.client.bounds import MAX_SAMPLE_POINTS, SAMPLE_ROW_BUDGET
from railyard.client.samplecsv import csv_text
from railyard.control.store.tables import SampleRow

MAX_POINTS = MAX_SAMPLE_POINTS
ROW_BUDGET = SAMPLE_ROW_BUDGET  # ~0.3 s of one store thread
DEFAULT_POINTS = 300


@dataclass
class Bucket:
    """One bucket's figures (None where nothing was read)."""

    t_s: float  # its start
    gpu_util_pct: float | None = None
    gpu_mem_used_bytes: float | None = None
    gpu_power_w: float | None = None
    gpu_temp_c_max: float | None = None
    cpu_pct: float | None = None
    host_mem_bytes: float | None = None
    gpus: dict[str, float] = field(default_factory=dict)  # "node:index" -> utilisation %


@dataclass(frozen=True)
class History:
    """The job's buckets, oldest first; ``bucket_s`` their width (0: no samples);
    ``readings`` how many ticks read the job (more than buckets: each is a mean of several);
    ``partial``: only the newest (or, from ``since_t_s``, the oldest) readings that fit in
    :data:`ROW_BUDGET` rows."""

    job_id: str
    bucket_s: float
    buckets: list[Bucket]
    readings: int
    partial: bool = False  # more readings than one request reads (`ROW_BUDGET`) were kept

    def gpu_names(self) -> list[str]:
        return sorted({name for b in self.buckets for name in b.gpus}, key=_gpu_order)


def _gpu_order(name: str) -> tuple[str, int]:
    node, _, index = name.rpartition(":")
    return node, int(index)


def _bucket_of(session: Session, t0: float, width_s: float) -> ColumnElement[int]:
    """The bucket number of a row: floor((t_s - t0) / width). PostgreSQL's cast rounds;
    SQLite's truncates, which is floor here (never negative)."""
    ratio = (SampleRow.t_s - t0) / width_s
    if session.get_bind().dialect.name == "postgresql":
        return cast(func.floor(ratio), Integer)
    return cast(ratio, Integer)


@dataclass(frozen=True)
class _Avg:
    """One bucket's means for one GPU (or, ``gpu`` None, one node's processes)."""

    node: str
    gpu: int | None
    util_pct: float | None
    mem_used_bytes: float | None
    power_w: float | None
    temp_c_max: float | None
    cpu_pct: float | None
    host_mem_bytes: float | None


def _known(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _sum(values: list[float | None]) -> float | None:
    known = _known(values)
    return sum(known) if known else None


def _bucket(t_s: float, groups: list[_Avg]) -> Bucket:
    gpus = [g for g in groups if g.gpu is not None]
    hosts = [g for g in groups if g.gpu is None]
    utils = _known([g.util_pct for g in gpus])
    temps = _known([g.temp_c_max for g in gpus])
    return Bucket(
        t_s=t_s,
        gpu_util_pct=sum(utils) / len(utils) if utils else None,
        gpu_mem_used_bytes=_sum([g.mem_used_bytes for g in gpus]),
        gpu_power_w=_sum([g.power_w for g in gpus]),
        gpu_temp_c_max=max(temps) if temps else None,
        cpu_pct=_sum([g.cpu_pct for g in hosts]),
        host_mem_bytes=_sum([g.host_mem_bytes for g in hosts]),
        gpus={f"{g.node}:{g.gpu}": g.util_pct for g in gpus if g.util_pct is not None},
    )


def _tick(session: Session, job_id: str, last: float, first: float) -> tuple[int, float]:
    """Rows per reading and the time between readings, from the newest two (index seeks:
    nothing here reads the whole history)."""
    mine = SampleRow.job_id == job_id
    per_tick = session.execute(select(func.count()).where(mine, SampleRow.t_s == last)).scalar_one()
    before = session.execute(
        select(func.max(SampleRow.t_s)).where(mine, SampleRow.t_s < last, SampleRow.t_s >= first)
    ).scalar_one()
    return max(1, int(per_tick)), (last - before) if before is not None else 1.0


def history(session: Session, job_id: str, *, points: int = DEFAULT_POINTS,
            since_t_s: float | None = None, last_s: float | None = None) -> History:  # fmt: skip
    """At most ``points`` buckets of the job's samples from ``since_t_s``, or of its last
    ``last_s`` seconds of samples (a page's graph of a week-long job reads hours, not the
    week); the caller has checked the job is the reader's to see. One request aggregates at
    most about :data:`ROW_BUDGET` rows, whatever the job's size and age: a 256-node job's
    week is 140 M rows, and one user's request must not stall the store for others."""
    where = [SampleRow.job_id == job_id]
    if since_t_s is not None:
        where.append(SampleRow.t_s >= since_t_s)
    span = select(func.min(SampleRow.t_s), func.max(SampleRow.t_s)).where(*where)
    first, last = session.execute(span).one()
    if first is None:
        return History(job_id, 0.0, [], 0)
    if last_s is not None and last - first > last_s:
        first = last - last_s
    per_tick, tick_s = _tick(session, job_id, last, first)
    max_span_s = (max(1, ROW_BUDGET // per_tick) - 1) * tick_s
    partial = last - first > max_span_s
    if partial and since_t_s is not None:  # read forward from where the reader asked
        last = first + max_span_s
    elif partial:
        first = last - max_span_s
    where += [SampleRow.t_s >= first, SampleRow.t_s <= last]
    count = select(func.count(func.distinct(SampleRow.t_s))).where(*where)
    readings = session.execute(count).scalar_one()
    width_s = max(1.0, math.ceil((last - first) / points + 1e-9))
    bucket = _bucket_of(session, first, width_s).label("bucket")
    rows = session.execute(
        select(
            bucket, SampleRow.node, SampleRow.gpu,
            func.avg(SampleRow.gpu_util_pct), func.avg(SampleRow.gpu_mem_used_bytes),
            func.avg(SampleRow.gpu_power_w), func.max(SampleRow.gpu_temp_c),
            func.avg(SampleRow.cpu_pct), func.avg(SampleRow.host_mem_bytes),
        ).where(*where).group_by(bucket, SampleRow.node, SampleRow.gpu).order_by(bucket)
    ).all()  # fmt: skip
    grouped: dict[int, list[_Avg]] = defaultdict(list)
    for r in rows:
        figures = (None if v is None else float(v) for v in r[3:])
        grouped[int(r[0])].append(_Avg(r[1], r[2], *figures))
    buckets = [_bucket(first + n * width_s, grouped[n]) for n in sorted(grouped)]
    return History(job_id, width_s, buckets, int(readings), partial)


def to_csv(h: History) -> str:
    """One line per bucket (`client.samplecsv`)."""
    return csv_text([vars(b) for b in h.buckets], h.gpu_names())
