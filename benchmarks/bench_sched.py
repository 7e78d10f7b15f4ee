"""Benchmark of the scheduler core, `railyard.sched.cycle`.

    python benchmarks/bench_sched.py [--quick]

1. One cycle on a 2,048-GPU cluster (256 nodes x 8 H100, 16 scalable units of 16 nodes, one
   leaf group per SU, rail-optimized) with 10,000 pending and 1,500 running jobs, sizes
   skewed small like real traces, and on eight times that (16,384 GPUs, 12,000 running),
   under four policies (the default, FIFO, conservative backfill, time slicing). Reports
   the least, median and p90 over repeated cycles (on a shared machine the least is the one
   other tenants disturbed least).
2. Admission throughput shaped like Kueue's baseline performance test: 5 cohorts x 6
   queues, 15,000 small workloads; cycles run on a virtual clock (finished jobs free their
   GPUs) until every workload is admitted. Reports admitted jobs per second of cycle time.

`--huge`: only the 100,352-GPU size of issue 56 (12,544 nodes, 49 times the 2,048-GPU
scenario: 73,500 running, 10,000 pending), per policy the CPU time of the first cycle with a
fresh cache (a start) and the median of the warm ones after it, and a digest of its plan
(`--check OTHER.json`: the plans must equal another checkout's); writes bench_sched_huge.json.

Prints a table and writes benchmarks/results/bench_sched.json.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import platform
import random
import statistics
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from railyard.sched import (
    ClusterState,
    CycleCache,
    CycleResult,
    Job,
    Level,
    Node,
    Queue,
    RunningJob,
    SchedulerConfig,
    TopologyMode,
    TopologyRequirement,
    Usage,
    cycle,
)
from railyard.sched.policies.placement import FabricAware
from railyard.sched.snapshot import Shape, Snapshot, Topology

H100 = "H100-SXM-80GB"
GPUS_PER_NODE = 8
RESULTS = Path(__file__).parent / "results" / "bench_sched.json"

# (GPUs, weight): most jobs use 1-8 GPUs, a few are large gangs (shaped after public traces
# such as Microsoft Philly and Alibaba PAI, where over 80% of jobs use a single node).
PENDING_SIZES = [
    (1, 40), (2, 14), (4, 14), (8, 18), (16, 5), (32, 3.5), (64, 2.5), (128, 1.5),
    (256, 0.8), (512, 0.4), (1024, 0.3),
]  # fmt: skip
RUNNING_SIZES = {1: 1280, 2: 150, 4: 50, 8: 15, 16: 4, 32: 1}  # 1,500 jobs, 1,996 GPUs


def rail_optimized_cluster(sus: int = 16) -> list[Node]:
    """`sus` scalable units of 16 nodes x 8 GPUs, one leaf group per SU: 16 SUs are 2,048
    GPUs, 128 SUs 16,384."""
    return [
        Node(
            f"su{su}-n{k}",
            H100,
            GPUS_PER_NODE,
            cpu_cores=112,
            mem_gb=2048,
            path=(f"su{su}", f"su{su}-lg0"),
        )
        for su in range(sus)
        for k in range(16)
    ]


def tenant_queues(scale: int = 1) -> list[Queue]:
    """One cohort (the cluster) of two organisations x four teams. Nominal quotas add up to
    1.5x the cluster (over-committed, as shared clusters often are), so most waiting jobs
    wait for GPUs, not quota, and placement and backfill do the work."""
    out = [
        Queue("cluster"),
        Queue("org0", parent="cluster", weight=2.0),
        Queue("org1", parent="cluster", weight=1.0),
    ]
    for o in range(2):
        for t in range(4):
            out.append(
                Queue(
                    f"o{o}-t{t}",
                    parent=f"org{o}",
                    nominal_gpus={H100: 384 * scale},
                    weight=1 + t % 2,
                )
            )
    return out


def make_job(rng: random.Random, id: str, gpus: int, queue: str, now_t_s: float) -> Job:
    topology = None
    if 16 <= gpus <= 128 and rng.random() < 0.3:
        topology = TopologyRequirement(Level.LEAF_GROUP, TopologyMode.REQUIRED)
    return Job.with_total_gpus(
        id=id,
        queue=queue,
        flavor=H100,
        gpus=gpus,
        gpus_per_node=GPUS_PER_NODE,
        user=f"user{rng.randrange(50)}",
        priority=rng.choices([0, 100, 1000], weights=[85, 12, 3])[0],
        preemptible=rng.random() < 0.2,
        walltime_s=None if rng.random() < 0.1 else rng.uniform(600, 2 * 86400),
        topology=topology,
        submit_t_s=now_t_s - rng.uniform(0, 86400),
        min_runtime_s=rng.choice([0.0, 600.0]),
        checkpoint_grace_s=rng.choice([30.0, 120.0]),
    )


def scenario_state(seed: int, n_pending: int, now_t_s: float, scale: int = 1) -> ClusterState:
    """The 2,048-GPU scenario, or `scale` times its nodes, quotas and running jobs (8: the
    16,384-GPU one, 12,000 running); the pending line stays `n_pending` long."""
    rng = random.Random(seed)
    inventory = rail_optimized_cluster(16 * scale)
    queues = tenant_queues(scale)
    leaves = [q.name for q in queues if q.name.startswith("o") and "-t" in q.name]
    snap = Snapshot(Topology(inventory))
    place = FabricAware()
    running = []
    sizes = [g for g, n in sorted(RUNNING_SIZES.items(), reverse=True) for _ in range(n * scale)]
    for k, gpus in enumerate(sizes):
        job = make_job(rng, f"r{k}", gpus, rng.choice(leaves), now_t_s)
        job = replace(job, topology=None)
        masks = place.place(snap, Shape.of(job))
        assert masks is not None, "running jobs must fit the cluster"
        snap.take(masks)
        start_t_s = now_t_s - rng.uniform(0, 0.9 * (job.walltime_s or 86400))
        ckpt = start_t_s + rng.uniform(0, now_t_s - start_t_s)
        running.append(RunningJob(job, snap.topo.placement(masks), start_t_s, ckpt))
    weights = [w for _, w in PENDING_SIZES]
    pending = [
        make_job(rng, f"p{k}", rng.choices([g for g, _ in PENDING_SIZES], weights)[0],
                 rng.choice(leaves), now_t_s)
        for k in range(n_pending)
    ]  # fmt: skip
    usage = Usage(
        queue_gpu_s={q.name: rng.uniform(1e5, 1e7) for q in queues},
        user_gpu_s={(q, f"user{u}"): rng.uniform(1e3, 1e6) for q in leaves for u in range(50)},
    )
    return ClusterState(inventory, queues, pending, running, usage)


def time_cycles(state: ClusterState, now_t_s: float, config: SchedulerConfig, repeats: int) -> dict:
    """Wall-clock (and CPU) time of `repeats` identical cycles; CPU time is reported too
    because a shared machine's wall clock includes other processes' turns."""
    wall_ms, cpu_ms = [], []
    result = None
    cache = CycleCache()  # what a driver keeps between cycles
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        result = cycle(state, now_t_s, config, cache)
        wall_ms.append((time.perf_counter() - w0) * 1e3)
        cpu_ms.append((time.process_time() - c0) * 1e3)
    assert result is not None
    wall_ms.sort()
    cpu_ms.sort()
    p90 = min(len(wall_ms) - 1, math.ceil(0.9 * len(wall_ms)) - 1)
    return {
        "min_ms": wall_ms[0],  # the least disturbed: other tenants only ever add time
        "median_ms": statistics.median(wall_ms),
        "p90_ms": wall_ms[p90],
        "cpu_median_ms": statistics.median(cpu_ms),
        "cpu_p90_ms": cpu_ms[p90],
        "cycles": repeats,
        "starts": len(result.starts),
        "preemptions": len(result.preemptions),
        "reservations": len(result.reservations),
        "pending_reasons": dict(Counter(r.value for r in result.pending_reasons.values())),
    }


HUGE_SCALE = 49  # 49 x 2,048 = 100,352 GPUs, 12,544 nodes, 73,500 running


def plan_digest(result: CycleResult) -> str:
    """A digest of everything a cycle decided (starts, evictions, requeues, reasons,
    reservations, nominations), in a fixed order: equal digests from two checkouts on the
    same seeded workload mean the same plan, so a speed-up can show it changed nothing."""
    parts = [
        sorted(repr(s) for s in result.starts),
        sorted(repr(p) for p in result.preemptions),
        sorted(repr(r) for r in result.requeues),
        sorted((k, v.value) for k, v in result.pending_reasons.items()),
        sorted((k, repr(v)) for k, v in result.reservations.items()),
        sorted(result.nominated),
    ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def first_and_warm(state: ClusterState, now_t_s: float, config: SchedulerConfig, warm: int) -> dict:
    """CPU ms of the first cycle with a fresh cache (the cycle after a start) and of `warm`
    cycles after it (a driver's steady state): on the same state, and on the same jobs in new
    tuples, as a driver hands them each cycle (the cache keeps some work only while a tuple
    is the very same object)."""
    cache = CycleCache()
    c0 = time.process_time()
    result = cycle(state, now_t_s, config, cache)
    first_ms = (time.process_time() - c0) * 1e3
    warm_ms, new_tuples_ms = [], []
    for _ in range(warm):
        c0 = time.process_time()
        again = cycle(state, now_t_s, config, cache)
        warm_ms.append((time.process_time() - c0) * 1e3)
        assert again == result, "a warm cycle on the same state decided otherwise"
        copied = replace(state, running=tuple(state.running), pending=tuple(state.pending))
        c0 = time.process_time()
        again = cycle(copied, now_t_s, config, cache)
        new_tuples_ms.append((time.process_time() - c0) * 1e3)
        assert again == result, "a warm cycle on the same jobs in new tuples decided otherwise"
    return {
        "plan": plan_digest(result),
        "first_cpu_ms": first_ms,
        "warm_cpu_ms": sorted(warm_ms),
        "warm_cpu_median_ms": statistics.median(warm_ms),
        "warm_new_tuples_cpu_ms": sorted(new_tuples_ms),
        "warm_new_tuples_cpu_median_ms": statistics.median(new_tuples_ms),
        "starts": len(result.starts),
        "preemptions": len(result.preemptions),
    }


def huge(configs: dict[str, SchedulerConfig], warm: int, check: Path | None = None) -> None:
    """`check`: a bench_sched_huge.json of another checkout (or run) whose plans must be
    these (exit 1 if one differs). A full `gc.collect()` before each policy's first cycle:
    the scenario's build (and the previous policy's cycles) leave garbage whose cyclic-GC
    pass would otherwise land in whichever timed cycle first crosses the threshold; the
    cycles' own allocations still trigger the collections they trigger."""
    now_t_s = 1_000_000.0
    t0 = time.perf_counter()
    state = scenario_state(seed=7, n_pending=10_000, now_t_s=now_t_s, scale=HUGE_SCALE)
    build_s = time.perf_counter() - t0
    gpus = sum(n.gpus for n in state.nodes)
    out = {}
    for name, c in configs.items():
        gc.collect()
        out[name] = first_and_warm(state, now_t_s, c, warm)
    title = (
        f"one cycle at {gpus:,} GPUs ({len(state.nodes):,} nodes), "
        f"{len(state.running):,} running, {len(state.pending):,} pending: CPU ms"
    )
    table = Table(title=title)
    cols = ("config", "first (cold)", "warm median", "warm all", "warm, new tuples", "starts",
            "preempts", "plan")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="left" if col == "config" else "right")
    for name, r in out.items():
        table.add_row(
            name, f"{r['first_cpu_ms']:.0f}", f"{r['warm_cpu_median_ms']:.0f}",
            ", ".join(f"{x:.0f}" for x in r["warm_cpu_ms"]),
            f"{r['warm_new_tuples_cpu_median_ms']:.0f}", str(r["starts"]),
            str(r["preemptions"]), r["plan"],
        )  # fmt: skip
    Console(width=140).print(table)
    path = RESULTS.with_name("bench_sched_huge.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"gpus": gpus, "build_s": build_s, "by_config": out}, indent=2))
    if check is not None:
        before = json.loads(check.read_text())["by_config"]
        differ = [n for n, r in out.items() if n in before and before[n].get("plan") != r["plan"]]
        if differ:
            raise SystemExit(f"bench_sched --huge: plans differ from {check} for {differ}")
        print(f"plans equal to {check}'s for {sorted(set(out) & set(before))}")


def kueue_shaped_throughput(n_workloads: int, seed: int) -> dict:
    """5 cohorts x 6 queues on the 2,048-GPU cluster; workloads of 1-4 GPUs, 1-5 min long."""
    rng = random.Random(seed)
    inventory = rail_optimized_cluster()
    queues = []
    for c in range(5):
        queues.append(Queue(f"cohort{c}"))
        queues += [
            Queue(f"c{c}-q{k}", parent=f"cohort{c}", nominal_gpus={H100: 68}) for k in range(6)
        ]
    leaves = [q.name for q in queues if q.parent is not None]
    pending = [
        Job(
            id=f"w{k}",
            queue=leaves[k % len(leaves)],
            flavor=H100,
            gpus_per_worker=rng.choice([1, 1, 2, 4]),
            walltime_s=rng.uniform(60, 300),
            submit_t_s=0.0,
            priority=rng.choice([0, 0, 100]),
        )
        for k in range(n_workloads)
    ]
    config = SchedulerConfig()
    running: list[RunningJob] = []
    t_s, dt_s, cycle_s, cycles = 0.0, 30.0, 0.0, 0
    admitted = 0
    cache = CycleCache()
    while pending:
        running = [r for r in running if r.start_t_s + (r.job.walltime_s or 0) > t_s]
        state = ClusterState(inventory, queues, pending, running)
        t0 = time.perf_counter()
        result = cycle(state, t_s, config, cache)
        cycle_s += time.perf_counter() - t0
        cycles += 1
        by_id = {j.id: j for j in pending}
        for s in result.starts:
            running.append(RunningJob(by_id[s.job_id], s.placement, t_s))
        admitted += len(result.starts)
        started = result.started_ids
        pending = [j for j in pending if j.id not in started]
        t_s += dt_s
    return {
        "workloads": n_workloads,
        "admitted": admitted,
        "cycles": cycles,
        "cycle_time_s": cycle_s,
        "jobs_per_s": admitted / cycle_s,
        "virtual_time_s": t_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller scenario 2")
    parser.add_argument("--huge", action="store_true", help="only 100,352 GPUs (issue 56)")
    parser.add_argument(
        "--check", type=Path, help="with --huge: a bench_sched_huge.json whose plans must match"
    )
    parser.add_argument("--warm", type=int, default=3, help="with --huge: warm cycles per policy")
    args = parser.parse_args()
    now_t_s = 1_000_000.0
    repeats = 5 if args.quick else 11
    configs = {
        "fairshare+easy+preempt (default)": SchedulerConfig(),
        "fifo, no backfill, no preemption": SchedulerConfig(
            ordering="fifo", backfill="none", preemption="off"
        ),
        "fairshare+conservative+preempt": SchedulerConfig(backfill="conservative"),
        "las (time slicing)": SchedulerConfig.of(ordering="las", backfill="none", preemption="las"),
    }
    if args.huge:
        huge(configs, warm=args.warm, check=args.check)
        return
    by_size: dict[str, dict[str, dict]] = {}
    for scale in (1, 8):
        state = scenario_state(seed=7, n_pending=10_000, now_t_s=now_t_s, scale=scale)
        label = f"{2048 * scale:,} GPUs"
        by_size[label] = {
            name: time_cycles(state, now_t_s, c, repeats if scale == 1 else max(3, repeats // 2))
            for name, c in configs.items()
        }
    one_cycle = by_size["2,048 GPUs"]
    throughput = kueue_shaped_throughput(3_000 if args.quick else 15_000, seed=11)
    report = {
        "machine": {
            "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_avg_1m_at_end": None,
        },
        "scenario_1_one_cycle": {
            "nodes": 256, "gpus": 2048, "pending": 10_000, "running": 1_500, "by_config": one_cycle,
        },
        "scenario_1b_one_cycle_16k": {
            "nodes": 2048, "gpus": 16384, "pending": 10_000, "running": 12_000,
            "by_config": by_size["16,384 GPUs"],
        },
        "scenario_2_admission_throughput": throughput,
    }  # fmt: skip
    report["machine"]["load_avg_1m_at_end"] = os.getloadavg()[0]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")

    table = Table(title="railyard.sched: one cycle, 10,000 pending (1,500 / 12,000 running)")
    for col in ("cluster", "config", "min ms", "median ms", "p90 ms", "cpu median ms",
                "starts", "preempts", "resv"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("cluster", "config") else "right")
    for size, results in by_size.items():
        for name, r in results.items():
            table.add_row(
                size, name, f"{r['min_ms']:.1f}", f"{r['median_ms']:.1f}", f"{r['p90_ms']:.1f}",
                f"{r['cpu_median_ms']:.1f}", str(r["starts"]), str(r["preemptions"]),
                str(r["reservations"]),
            )  # fmt: skip
    console = Console(width=130)
    console.print(table)
    console.print(
        f"Kueue-shaped admission: {throughput['admitted']} workloads in {throughput['cycles']} "
        f"cycles, {throughput['cycle_time_s']:.2f} s of cycle time -> "
        f"{throughput['jobs_per_s']:.0f} jobs/s"
    )
    console.print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}; wrote {RESULTS}")


if __name__ == "__main__":
    main()
