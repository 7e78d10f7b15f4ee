"""Fake clusters as data: a scheduling test should read as a few lines of inventory and jobs."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from railyard.sched import (
    ClusterState,
    CycleCache,
    CycleResult,
    Job,
    Node,
    NodeState,
    Queue,
    RunningJob,
    SchedulerConfig,
    Usage,
    accrue_usage,
    cycle,
)

H100 = "H100-SXM-80GB"


def nodes(
    count: int,
    *,
    gpus: int = 8,
    per_lg: int = 2,
    lg_per_su: int = 2,
    flavor: str = H100,
    domains: tuple[tuple[int, ...], ...] = (),
    states: Mapping[str, NodeState] | None = None,
    prefix: str = "n",
) -> list[Node]:
    """`count` nodes n0, n1, ...: `per_lg` per leaf group, `lg_per_su` leaf groups per SU."""
    out = []
    for i in range(count):
        lg = i // per_lg
        su = lg // lg_per_su
        name = f"{prefix}{i}"
        out.append(
            Node(
                name,
                flavor,
                gpus,
                path=(f"su{su}", f"su{su}-lg{lg}"),
                nvlink_domains=domains,
                state=(states or {}).get(name, NodeState.READY),
            )
        )
    return out


def flat_queues(
    nominal: Mapping[str, int],
    *,
    weights: Mapping[str, float] | None = None,
    borrow: Mapping[str, int] | None = None,
    lend: Mapping[str, int] | None = None,
    flavor: str = H100,
    priority_preemption: bool = False,
) -> list[Queue]:
    """One cohort `org` with leaf queues of the given nominal GPUs."""
    out = [Queue("org")]
    for name, gpus in nominal.items():
        out.append(
            Queue(
                name,
                parent="org",
                nominal_gpus={flavor: gpus},
                borrowing_limit_gpus={flavor: borrow[name]} if borrow and name in borrow else {},
                lending_limit_gpus={flavor: lend[name]} if lend and name in lend else {},
                weight=(weights or {}).get(name, 1.0),
                priority_preemption=priority_preemption,
            )
        )
    return out


def job(id: str, queue: str = "a", gpus: int = 1, workers: int = 1, **kw: object) -> Job:
    """A job of `workers` x `gpus` GPUs (gpus is per worker)."""
    kw.setdefault("flavor", H100)
    return Job(id=id, queue=queue, workers=workers, gpus_per_worker=gpus, **kw)  # type: ignore[arg-type]


def placement(spec: str) -> dict[str, tuple[int, ...]]:
    """'n0:0-3 n1:0-7 n2:5' -> {'n0': (0, 1, 2, 3), ...}."""
    out: dict[str, tuple[int, ...]] = {}
    for part in spec.split():
        name, gpus = part.split(":")
        idx: list[int] = []
        for piece in gpus.split(","):
            lo, _, hi = piece.partition("-")
            idx.extend(range(int(lo), int(hi or lo) + 1))
        out[name] = tuple(idx)
    return out


def running(j: Job, where: str, start_t_s: float = 0.0, **kw: object) -> RunningJob:
    return RunningJob(j, placement(where), start_t_s, **kw)  # type: ignore[arg-type]


def state(
    inventory: Sequence[Node],
    queues: Sequence[Queue],
    pending: Iterable[Job] = (),
    run: Iterable[RunningJob] = (),
    usage: Usage | None = None,
) -> ClusterState:
    return ClusterState(inventory, queues, tuple(pending), tuple(run), usage or Usage())


def schedule(
    s: ClusterState, now_t_s: float = 0.0, *, cache: CycleCache | None = None, **config: object
) -> CycleResult:
    return cycle(s, now_t_s, SchedulerConfig(**config), cache)  # type: ignore[arg-type]


def used_gpus(result: CycleResult) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for s in result.starts:
        for name, gpus in s.placement.items():
            out.setdefault(name, set()).update(gpus)
    return out


Arrivals = Callable[[float, Sequence[Job], Sequence[RunningJob]], list[Job]]


@dataclass
class Trace:
    """What a driven run did: GPU-seconds per queue after warm-up, and start times."""

    gpu_s: dict[str, float] = field(default_factory=dict)
    start_t_s: dict[str, float] = field(default_factory=dict)
    cycles: int = 0


def drive(
    inventory: Sequence[Node],
    queues: Sequence[Queue],
    arrivals: Arrivals,
    config: SchedulerConfig,
    *,
    until_t_s: float,
    dt_s: float,
    half_life_s: float,
    warmup_t_s: float = 0.0,
) -> Trace:
    """A minimal driver: finish jobs at their walltime, add arrivals, cycle, start, accrue."""
    pending: list[Job] = []
    run: list[RunningJob] = []
    usage = Usage()
    trace = Trace()
    t_s = 0.0
    while t_s < until_t_s:
        run = [r for r in run if r.start_t_s + (r.job.walltime_s or math.inf) > t_s]
        pending += arrivals(t_s, pending, run)
        result = cycle(ClusterState(inventory, queues, pending, run, usage), t_s, config)
        trace.cycles += 1
        by_id = {j.id: j for j in pending}
        for s in result.starts:
            run.append(RunningJob(by_id[s.job_id], s.placement, t_s))
            trace.start_t_s[s.job_id] = t_s
        started = result.started_ids
        pending = [j for j in pending if j.id not in started]
        if t_s >= warmup_t_s:
            for r in run:
                trace.gpu_s[r.job.queue] = trace.gpu_s.get(r.job.queue, 0.0) + r.gpus * dt_s
        usage = accrue_usage(usage, run, queues, dt_s, half_life_s)
        t_s += dt_s
    return trace
