"""The live loop's step at scale: 256 nodes, 2,048 GPUs and 10,000 pending jobs.

The production loop (`control.loop.Loop`: the world read, the lifecycle and the cycle, the
plan written with compare-and-set, the launches) runs on a real store (SQLite or PostgreSQL)
over the 2,048-GPU rail-optimized preset (`benchmarks.common.rail_optimized`, 256 HGX nodes).
The machines are emulated as tests/control/test_same_history.py does: the simulator's virtual
executor starts and ends the jobs on a virtual clock that moves ``--tick-s`` per step, so
only the control plane's own work is timed.

The store starts with ``--pending`` jobs of 8 queues and 8 users (1 to 16 GPUs, 5 minutes to
2 hours, with time limits); each step submits as many new jobs as the last one started, so
about ``--pending`` wait at every step. The loop first reads the ten thousand new rows, at
most ``LoopConfig.convert_max_rows`` a step, making no plan meanwhile (``reading``: how many
such steps, the longest in wall and CPU ms); the first plan then fills the empty cluster
(about a thousand starts) and is shown apart; the table's p50/p99 are over the steps after it, in
wall time and in this process's CPU time (the loop is single-threaded: on a shared machine the
CPU time is the steadier figure).

Run: ``python benchmarks/bench_live.py [--steps 60] [--stores sqlite,postgresql]``; prints a
table and writes ``benchmarks/results/bench_live.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_metrics import open_store
from benchmarks.common import rail_optimized

from railyard.control.loop.service import Loop, LoopConfig, freeze_heap
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, NodeRow, QueueRow, User
from railyard.inventory import scheduler_nodes
from railyard.sched import SchedulerConfig
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.engine import Engine
from railyard.sim.executor import VirtualExecutor
from railyard.sim.workload import FinalState

RESULTS = Path(__file__).parent / "results" / "bench_live.json"
QUEUES = [f"team{i}" for i in range(8)]
# (workers, GPUs per worker, weight): mostly small jobs, some whole nodes, a few two-node gangs
SHAPES = [(1, 1, 50), (1, 2, 20), (1, 4, 15), (1, 8, 12), (2, 8, 3)]


class World:
    """The store, the virtual machines and the jobs that arrive; ``submit`` adds jobs."""

    def __init__(self, store: Store, gpus_per_queue: int, seed: int) -> None:
        self.store = store
        self.rng = random.Random(seed)
        self.engine = Engine()
        self.executor = VirtualExecutor(engine=self.engine, checkpoint=NO_CKPT)
        self.number = 0
        nodes = scheduler_nodes(rail_optimized(2048))
        with store.session() as s:
            s.add(User(id=1, name="admin", is_admin=True, created_t_s=0.0))
            for i, _ in enumerate(QUEUES):
                s.add(User(id=i + 2, name=f"user{i}", created_t_s=0.0))
            flavor = nodes[0].flavor
            s.add(QueueRow(name="root", nominal_gpus={}, created_t_s=0.0))
            s.flush()
            for name in QUEUES:
                s.add(QueueRow(name=name, parent="root", nominal_gpus={flavor: gpus_per_queue},
                               created_t_s=0.0))  # fmt: skip
            for n in nodes:
                s.add(NodeRow(name=n.name, flavor=n.flavor, gpus=n.gpus, path=list(n.path),
                              cpu_cores=n.cpu_cores, mem_gb=n.mem_gb, updated_t_s=0.0))  # fmt: skip
        self.flavor = flavor
        self.nodes = len(nodes)
        self.gpus = sum(n.gpus for n in nodes)

    def submit(self, count: int) -> None:
        now = self.engine.now_t_s
        weights = [w for _, _, w in SHAPES]
        rows = []
        for _ in range(count):
            self.number += 1
            workers, per, _ = self.rng.choices(SHAPES, weights)[0]
            run_s = self.rng.uniform(300.0, 7200.0)
            q = self.rng.randrange(len(QUEUES))
            job_id = str(self.number)
            self.executor.register(job_id, run_s, workers * per, FinalState.COMPLETED)
            rows.append(JobRow(id=job_id, number=self.number, user_id=q + 2, queue=QUEUES[q],
                               command=["train"], flavor=self.flavor, workers=workers,
                               gpus_per_worker=per, walltime_s=run_s * 1.5, submit_t_s=now,
                               priority=self.rng.choice((0, 0, 0, 10)),
                               updated_t_s=now))  # fmt: skip
        with self.store.session() as s:
            s.add_all(rows)


NO_CKPT = CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0)


def measure(kind: str, tmp: Path, pending: int, steps: int, tick_s: float,
            profile: Path | None) -> dict[str, object]:  # fmt: skip
    with open_store(kind, tmp) as store:
        world = World(store, gpus_per_queue=2048 // len(QUEUES), seed=1)
        world.submit(pending)
        config = LoopConfig(state_dir=tmp, scheduler=SchedulerConfig())
        loop = Loop(store, world.executor, config, clock=lambda: world.engine.now_t_s)
        engine, executor = world.engine, world.executor
        took: list[float] = []
        cpu: list[float] = []
        cycle: list[float] = []
        started = finished = 0
        reading = 0  # steps that only read new rows (`Loop._converting`): before the first plan
        profiler = cProfile.Profile() if profile else None
        freeze_heap()  # as Loop.run does when the server starts
        i = -1
        while len(took) < reading + steps + 1:
            i += 1
            engine.run(lambda _t, ev: executor.on_event(ev), until_t_s=engine.now_t_s + tick_s)
            engine.now_t_s += tick_s
            if profiler is not None and i > 2:
                profiler.enable()
            began, began_cpu = time.perf_counter(), time.process_time()
            report = loop.step()
            took.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
            if profiler is not None:
                profiler.disable()
            if report.backlog and len(took) == reading + 1:
                reading += 1
            cycle.append(report.cycle_s)
            started += len(report.started)
            finished += len(report.finished)
            world.submit(len(report.started))  # keep about `pending` waiting
        if profiler is not None and profile is not None:
            profiler.dump_stats(str(profile))
            pstats.Stats(str(profile)).sort_stats("cumulative").print_stats(40)
    first = reading  # the first plan: it fills the empty cluster
    steady, steady_cpu = sorted(took[first + 1 :]), sorted(cpu[first + 1 :])
    return {
        "store": kind,
        "nodes": world.nodes,
        "gpus": world.gpus,
        "pending": pending,
        "steps": steps,
        "reading_steps": reading,
        "reading_max_ms": max(took[:first], default=0.0) * 1e3,
        "reading_cpu_max_ms": max(cpu[:first], default=0.0) * 1e3,
        "first_step_ms": took[first] * 1e3,
        "p50_ms": statistics.median(steady) * 1e3,
        "p99_ms": _p99(steady) * 1e3,
        "max_ms": steady[-1] * 1e3,
        "cpu_p50_ms": statistics.median(steady_cpu) * 1e3,
        "cpu_p99_ms": _p99(steady_cpu) * 1e3,
        "cycle_p50_ms": statistics.median(cycle[first + 1 :]) * 1e3,
        "starts": started,
        "ends": finished,
    }


def _p99(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--tick-s", type=float, default=30.0, help="virtual seconds per step")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--profile", type=Path, help="write cProfile stats of the steady steps")
    parser.add_argument("--label", default="", help="suffix of the results file")
    args = parser.parse_args()
    rows = []
    for kind in args.stores.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(measure(kind, Path(tmp), args.pending, args.steps, args.tick_s,
                                args.profile))  # fmt: skip
    head = (f"{'store':11}{'GPUs':>6}{'pending':>9}{'reading':>8}{'max ms':>8}{'cpu ms':>8}"
            f"{'first ms':>10}{'p50 ms':>9}{'p99 ms':>9}")  # fmt: skip
    print(f"{head}{'cpu p50':>9}{'cpu p99':>9}{'cycle p50':>10}{'starts':>8}{'ends':>7}")
    for r in rows:
        print(f"{r['store']:11}{r['gpus']:>6}{r['pending']:>9}{r['reading_steps']:>8}"
              f"{r['reading_max_ms']:>8.0f}{r['reading_cpu_max_ms']:>8.0f}{r['first_step_ms']:>10.0f}"
              f"{r['p50_ms']:>9.1f}{r['p99_ms']:>9.1f}{r['cpu_p50_ms']:>9.1f}"
              f"{r['cpu_p99_ms']:>9.1f}{r['cycle_p50_ms']:>10.1f}{r['starts']:>8}"
              f"{r['ends']:>7}")  # fmt: skip
    path = RESULTS.with_name(f"bench_live{'-' + args.label if args.label else ''}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": "live", "rows": rows}, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
