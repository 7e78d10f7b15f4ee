"""Runs: named policies, scenarios as plain data, and sweeps over processes or Ray.

A `Scenario` is picklable data (blueprint name, where the jobs come from, policy, seed), so a
sweep can ship it to a worker process or a Ray task, which rebuilds everything from it and
returns the JSON-ready metrics. Policy names are the ones the CLI takes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Any

from railyard.blueprint import load
from railyard.sched import Node, SchedulerConfig
from railyard.sim.arrivals import offered_load, rescale_load
from railyard.sim.checkpoints import CheckpointPolicy
from railyard.sim.cluster import cluster_nodes, flat_nodes, flat_queues
from railyard.sim.driver import Progress, SimConfig, Simulation
from railyard.sim.failures import FailureModel
from railyard.sim.health import HealthWorld
from railyard.sim.images import ImageWorld
from railyard.sim.jobrecords import rows
from railyard.sim.metrics import summarize
from railyard.sim.synthetic import generate
from railyard.sim.traces import load_trace
from railyard.sim.workload import Workload

# name -> (ordering, backfill, preemption). Without backfill a job blocked for GPUs stops the
# jobs behind it ("fifo", "fairshare": Slurm's sched/builtin); the "-greedy" variants let later
# jobs take any gap and hold nothing for the blocked one (Kueue's BestEffortFIFO); "easy"
# reserves for the first blocked job (Slurm's default backfill), "conservative" for each in
# turn; "las" slices time by least attained service (Tiresias' 2D-LAS, sched/policies/las.py):
# it needs preemptible jobs (Scenario.preemptible).
POLICIES: dict[str, tuple[str, str, str]] = {
    "fifo": ("fifo", "strict", "on"),
    "fifo-greedy": ("fifo", "none", "on"),
    "easy": ("fifo", "easy", "on"),
    "conservative": ("fifo", "conservative", "on"),
    "fairshare": ("fairshare", "strict", "on"),
    "fairshare-greedy": ("fairshare", "none", "on"),
    "fairshare+easy": ("fairshare", "easy", "on"),
    "las": ("las", "none", "las"),
    "maxmin": ("maxmin", "easy", "on"),
    "ftf": ("ftf", "easy", "on"),
}
"""`maxmin` and `ftf` are baselines from the literature (sched/policies/fairness.py): max-min
fair across users by the GPUs they hold now, and Themis' finish-time fairness; both order
jobs and reserve for the first blocked one (EASY), neither time-slices."""


def policy_config(name: str, **overrides: Any) -> SchedulerConfig:
    """The scheduler config for a policy name. Queues in a simulation carry no nominal quota
    unless given, so admission is `unlimited` by default: only capacity limits a queue."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; use one of {', '.join(POLICIES)}")
    ordering, backfill, preemption = POLICIES[name]
    kw: dict[str, Any] = {
        "ordering": ordering,
        "backfill": backfill,
        "preemption": preemption,
        "admission": "unlimited",
    }
    kw.update(overrides)
    return SchedulerConfig.of(**kw)  # las: its own defaults (config.TIME_SLICING_DEFAULTS)


@dataclass(frozen=True)
class Scenario:
    """One run, as data: cluster, jobs (a trace file or a synthetic profile), policy, seed."""

    blueprint: str
    policy: str
    seed: int = 0
    trace: str | None = None
    trace_format: str = "railyard"
    synthetic: str | None = None
    jobs: int = 1000
    load: float = 0.9
    max_gpus: int | None = None  # a synthetic trace's largest gang (cut to fit)
    walltime: str = "noisy"
    failures: bool = False
    cycle_interval_s: float = 60.0
    coalesce_s: float = 0.0
    checkpoint: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    preemptible: bool = False  # every job may be preempted (time slicing needs it)
    priority_preemption: bool = False  # queues let higher priorities preempt (opt-in)
    default_time_s: float | None = None  # queues' DefaultTime: a limit for jobs with none
    idle_limit_s: float | None = None  # queues' idle limit: sessions unused this long end
    tuning: tuple[tuple[str, Any], ...] = ()  # SchedulerConfig fields over the policy's
    health: HealthWorld | None = None  # scheduled health checks, and nodes that turn slow
    images: ImageWorld | None = None  # what pulling a job's container image costs
    # a flat cluster instead of the blueprint (`--nodes N --gpus-per-node G --gpu MODEL`)
    nodes: int | None = None
    gpus_per_node: int = 8
    gpu: str = "H100-SXM-80GB"
    trace_load: float | None = None  # a trace's arrivals rescaled to this offered load
    measure: tuple[int, int] | None = None  # only jobs K..L-1 (arrival order) are measured
    job_records: bool = False  # the result carries one record per job (`--jobs-out`)

    @property
    def cluster(self) -> str:
        """The cluster's name in results: the blueprint, or `flat-NxG-MODEL`."""
        if self.nodes is None:
            return self.blueprint
        return f"flat-{self.nodes}x{self.gpus_per_node}-{self.gpu}"

    @property
    def label(self) -> str:
        return f"{self.cluster}/{self.policy}/seed{self.seed}"


def scenario_nodes(s: Scenario) -> list[Node]:
    if s.nodes is not None:
        return flat_nodes(s.nodes, s.gpus_per_node, s.gpu)
    return cluster_nodes(load(s.blueprint).blueprint)


def scenario_workload(s: Scenario, cluster_gpus: int) -> Workload:
    """The jobs of `s`; a trace rescaled to `s.trace_load` (ValueError where it cannot be)."""
    if s.trace is not None:
        trace = load_trace(s.trace, s.trace_format)
        if s.trace_load is None:
            return trace
        return rescale_load(trace, cluster_gpus, s.trace_load)
    return generate(
        s.synthetic or "philly",
        jobs=s.jobs,
        cluster_gpus=cluster_gpus,
        load=s.load,
        seed=s.seed,
        walltime=s.walltime,
        max_gpus=s.max_gpus,
    )


def run_scenario(s: Scenario, progress: Progress | None = None) -> dict[str, Any]:
    """Build the cluster, the workload and the simulation from `s`; return the metrics."""
    nodes = scenario_nodes(s)
    workload = scenario_workload(s, sum(n.gpus for n in nodes))
    if s.preemptible:
        jobs = [replace(j, preemptible=True) for j in workload.jobs]
        workload = replace(workload, jobs=tuple(jobs))
    queues = flat_queues(
        workload.queues,
        priority_preemption=s.priority_preemption,
        default_time_s=s.default_time_s,
        idle_limit_s=s.idle_limit_s,
    )
    config = SimConfig(
        scheduler=policy_config(s.policy, **dict(s.tuning)),
        checkpoint=s.checkpoint,
        failures=FailureModel() if s.failures else None,
        cycle_interval_s=s.cycle_interval_s,
        coalesce_s=s.coalesce_s,
        seed=s.seed,
        health=s.health,
        images=s.images,
    )
    log = Simulation(nodes, workload, config, queues).run(progress)
    out = summarize(log, measure=s.measure)
    out.update(
        blueprint=s.cluster,
        policy=s.policy,
        seed=s.seed,
        workload=workload.name,
        skipped=workload.skipped,
        gpus=log.total_gpus,
    )
    out["offered_load"] = offered_load(workload, log.total_gpus)
    if log.health is not None:
        out["health"] = log.health
    if s.job_records:
        out["job_records"] = rows(list(log.records.values()), s.measure)
    return out


Done = Callable[[Scenario, dict[str, Any]], None]


def sweep(
    scenarios: Sequence[Scenario],
    *,
    workers: int = 2,
    ray_address: str | None = None,
    on_done: Done | None = None,
) -> list[dict[str, Any]]:
    """Run every scenario; results come back in the order given. One worker runs in-process."""
    if ray_address is not None:
        return _sweep_ray(scenarios, ray_address, on_done)
    results: dict[int, dict[str, Any]] = {}
    if workers <= 1 or len(scenarios) <= 1:
        for i, s in enumerate(scenarios):
            results[i] = run_scenario(s)
            if on_done is not None:
                on_done(s, results[i])
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(run_scenario, s): i for i, s in enumerate(scenarios)}
            for fut in as_completed(futures):
                i = futures[fut]
                results[i] = fut.result()
                if on_done is not None:
                    on_done(scenarios[i], results[i])
    return [results[i] for i in range(len(scenarios))]


def ray_available() -> bool:
    try:
        importlib.import_module("ray")
    except ImportError:
        return False
    return True


def _sweep_ray(
    scenarios: Sequence[Scenario], address: str, on_done: Done | None
) -> list[dict[str, Any]]:
    """Each scenario as a Ray task on an existing cluster (`address`, or "local" to start one)."""
    ray: Any = importlib.import_module("ray")
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, log_to_driver=False)
    task = ray.remote(run_scenario)
    refs = [task.remote(s) for s in scenarios]
    index = {ref: i for i, ref in enumerate(refs)}
    results: dict[int, dict[str, Any]] = {}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        i = index[ready[0]]
        results[i] = ray.get(ready[0])
        if on_done is not None:
            on_done(scenarios[i], results[i])
    return [results[i] for i in range(len(scenarios))]
