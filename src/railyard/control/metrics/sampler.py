"""Per-job resource history: every ``interval_s`` the sampler reads each running job's GPUs
(NVML, :func:`railyard.probe.read_gpus`) and processes (`exec.usage`), on this machine or
through each node's agent (Ray), and keeps one row per job, node and GPU, plus one per node
for its processes' CPU and memory, for ``retention_s``.

Why railyard keeps its own: ``/metrics`` has the same DCGM figures, but only now; without a
Prometheus scraping it nothing would draw a job's last hour. The rows are few (a 10 s
interval on an 8-GPU node writes 9 rows a tick in one transaction, about 0.5 M rows a week
when the node is busy) and the job page and ``railyard stats`` read them bucketed
(`control.usecases.jobsamples`). Figures in dcgm-exporter's meaning (util %, framebuffer
used, power W, temperature C); host CPU as ``top`` shows it (100 = one core busy).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from railyard.control.errors import is_transient
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, JobState, SampleRow
from railyard.exec.usage import MeasuresUsage, NodeReading, ProcessUsage, ReadsNodes
from railyard.probe import GpuReading

log = logging.getLogger(__name__)

MIB_BYTES = 1024 * 1024
PRUNE_BATCH = 5_000  # rows past the retention deleted a tick at most (a short write)
WRITE_TRIES = 3  # a tick's write, tried again while the store is busy
WRITE_BACKOFF_S = 0.5
SAMPLED_STATES = (JobState.RUNNING.value,)


class HasName(Protocol):
    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class SamplerConfig:
    """How often, and how long rows are kept (``railyard up --sample-interval``,
    ``--sample-retention``)."""

    interval_s: float = 10.0
    retention_s: float = 7 * 86400.0


@dataclass(frozen=True)
class Running:
    """A running job, its attempt and its GPUs per node."""

    job_id: str
    attempt: int
    placement: Mapping[str, tuple[int, ...]]


# reads the running jobs it is given (those on the nodes it can reach)
Reader = Callable[[Sequence[Running]], Mapping[str, Sequence[NodeReading]]]

FIGURES = ("gpu", "gpu_util_pct", "gpu_mem_used_bytes", "gpu_power_w", "gpu_temp_c", "cpu_pct",
           "host_mem_bytes")  # fmt: skip


def row(job: Running, node: str, t_s: float, **figures: object) -> dict[str, object]:
    """A ``job_samples`` row; every row has every column (one executemany)."""
    return {"job_id": job.job_id, "attempt": job.attempt, "t_s": t_s, "node": node,
            **dict.fromkeys(FIGURES), **figures}  # fmt: skip


def gpu_rows(job: Running, reading: NodeReading, t_s: float) -> list[dict[str, object]]:
    """One row per GPU of the job there that NVML reported on."""
    held = set(job.placement.get(reading.node, ()))
    rows: list[dict[str, object]] = []
    for r in reading.gpus:
        if r.index not in held:
            continue
        used = None if r.fb_used_mib is None else r.fb_used_mib * MIB_BYTES
        figures = {"gpu_util_pct": r.util_pct, "gpu_mem_used_bytes": used,
                   "gpu_power_w": r.power_w, "gpu_temp_c": r.temp_c}  # fmt: skip
        rows.append(row(job, reading.node, t_s, gpu=r.index, **figures))
    return rows


def cpu_pct(before: tuple[float, float] | None, t_s: float, cpu_s: float) -> float | None:
    """Busy cores x 100 since ``before`` (time, cumulative CPU seconds); None at the first
    reading. A process that left uncounted (reparented, not reaped) can make the sum drop:
    that interval counts as idle rather than negative."""
    if before is None or t_s <= before[0]:
        return None
    return max(0.0, cpu_s - before[1]) / (t_s - before[0]) * 100.0


def local_reader(
    node: str,
    read_gpus: Callable[[], Sequence[GpuReading]],
    usage: Callable[[str], ProcessUsage | None] | None,
) -> Reader:
    """The jobs on this machine (``node``): NVML read once a tick, processes per job."""

    def read(jobs: Sequence[Running]) -> dict[str, list[NodeReading]]:
        here = [j for j in jobs if node in j.placement]
        gpus = tuple(read_gpus()) if any(j.placement[node] for j in here) else ()
        return {j.job_id: [NodeReading(node, usage(j.job_id) if usage else None, gpus)]
                for j in here}  # fmt: skip

    return read


class Sampler:
    """Reads and writes one tick at a time (:meth:`tick`); :meth:`run` ticks until stopped,
    on a thread of its own (a slow NVML, node or store never delays the scheduling loop)."""

    def __init__(
        self,
        store: Store,
        reader: Reader,
        config: SamplerConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store, self.reader = store, reader
        self.config = config or SamplerConfig()
        self.clock = clock
        self._cpu: dict[tuple[str, int, str], tuple[float, float]] = {}

    def running(self) -> list[Running]:
        with self.store.session() as session:
            rows = session.execute(
                select(JobRow.id, JobRow.restart_count, JobRow.placement).where(
                    JobRow.state.in_(SAMPLED_STATES)
                )
            ).all()
        return [
            Running(job_id, attempt, {n: tuple(int(i) for i in g) for n, g in placement.items()})
            for job_id, attempt, placement in rows
            if placement
        ]

    def tick(self) -> int:
        """Sample every running job the reader reaches once; the number of rows written."""
        jobs = {j.job_id: j for j in self.running()}
        found = self.reader(list(jobs.values())) if jobs else {}
        t_s = self.clock()
        rows: list[dict[str, object]] = []
        seen: set[tuple[str, int, str]] = set()
        for job_id, readings in found.items():
            job = jobs[job_id]
            for reading in readings:
                rows += gpu_rows(job, reading, t_s)
                used = reading.usage
                if used is None or used.processes == 0:  # not measured, or between its last
                    continue  # exit and the loop's noticing: no reading, not a false zero
                key = (job_id, job.attempt, reading.node)
                seen.add(key)
                pct = cpu_pct(self._cpu.get(key), t_s, used.cpu_s)
                self._cpu[key] = (t_s, used.cpu_s)
                rows.append(row(job, reading.node, t_s, cpu_pct=pct,
                                host_mem_bytes=float(used.rss_bytes)))  # fmt: skip
        self._cpu = {k: v for k, v in self._cpu.items() if k in seen}
        for attempt in range(WRITE_TRIES):  # a busy store (a batch submit's write) is waited
            try:  # out: the readings are kept, not dropped with a "database is locked"
                self._write(rows, t_s)
                break
            except DBAPIError as exc:
                if attempt == WRITE_TRIES - 1 or not is_transient(exc):
                    raise
                time.sleep(WRITE_BACKOFF_S * (attempt + 1))
        return len(rows)

    def _write(self, rows: list[dict[str, object]], t_s: float) -> None:
        with self.store.session(write=True) as session:
            if rows:
                session.execute(insert(SampleRow), rows)
            # every tick, a bounded batch: more than a tick writes (2,304 rows for 2,048 GPUs
            # on 256 nodes), and no tick holds the store for one big delete
            expired = select(SampleRow.id).where(SampleRow.t_s < t_s - self.config.retention_s)
            session.execute(delete(SampleRow).where(SampleRow.id.in_(expired.limit(PRUNE_BATCH))))

    def start(self, stop: threading.Event) -> threading.Thread:
        """:meth:`run` on a daemon thread of its own."""
        thread = threading.Thread(target=self.run, args=(stop,), name="railyard-sampler",
                                  daemon=True)  # fmt: skip
        thread.start()
        return thread

    def run(self, stop: threading.Event) -> None:
        """Tick every ``interval_s`` until ``stop``; a failed tick is logged, not fatal (the
        next one reads afresh)."""
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.tick()
            except (SQLAlchemyError, OSError) as exc:  # the store or a node, for now
                log.warning("railyard sampler: tick failed: %s", exc)
            except Exception:  # a bug must not end the history for the server's lifetime
                log.exception("railyard sampler: tick failed")
            stop.wait(max(0.0, self.config.interval_s - (time.monotonic() - started)))


def job_sampler(
    store: Store,
    local: HasName | None,
    executor: object,
    read_gpus: Callable[[], Sequence[GpuReading]],
    config: SamplerConfig,
) -> Sampler | None:
    """The sampler of ``railyard up`` (None with an interval of 0): every node's jobs through
    an executor whose nodes read themselves (Ray's agents), else this machine's (``local``),
    its processes measured where the executor can (`exec.usage`)."""
    if config.interval_s <= 0:
        return None
    if isinstance(executor, ReadsNodes):
        nodes = executor
        return Sampler(store, lambda jobs: nodes.read_jobs({j.job_id: j.placement for j in jobs}),
                       config)  # fmt: skip
    if local is None:
        return None
    usage = executor.usage if isinstance(executor, MeasuresUsage) else None
    return Sampler(store, local_reader(local.name, read_gpus, usage), config)
