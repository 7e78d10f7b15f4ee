"""The soak (issue 21, item 6): a real `railyard up` under seeded random load for a bounded
time, on SQLite and PostgreSQL: single jobs, batches and arrays of real short processes,
cancels, holds and releases, node drains and resumes, time limits, and kill -9 of the server
at random moments, and storms (an array of 1,000 tasks in and out while the rest goes on).
Then every job must settle exactly once (judged from the jobs' own mark files, the store's
rows and events, and /proc), none stuck, /healthz green, the store's check clean (SQLite
``PRAGMA integrity_check``; PostgreSQL rows that agree with their events).

Run: ``python benchmarks/soak.py [--minutes 5] [--seed N] [--stores sqlite,postgresql]``;
``--memory [--trace]``: steady load without kills, the server's resident memory sampled over
time (start, after ``--warmup``, end, least-squares slope per hour and per 1,000 jobs) into
``benchmarks/results/soak_memory.json``; ``--trace`` adds tracemalloc's biggest growths.
(PostgreSQL as in the tests: ``RAILYARD_TEST_PG``). Prints the seed first and again on a
failure (``--seed`` replays the same random choices; which jobs they hit still depends on the
server's timing), a table, and writes
``benchmarks/results/soak.json``; exits 1 if a store's soak found a violation. The default
test suite runs a short form (``tests/integration/test_soak.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.control.conftest import fresh_pg_database
from tests.integration.memsoak import MemoryPlan, run_memory_soak
from tests.integration.soak import SoakPlan, SoakResult, run_soak

RESULTS = Path(__file__).parent / "results" / "soak.json"
MEMORY_RESULTS = Path(__file__).parent / "results" / "soak_memory.json"
MEMORY_HEAD = ("store", "traced", "wall_s", "jobs", "rss_start_mib", "rss_warm_mib",
               "rss_end_mib", "slope_mib_per_h", "kib_per_1000_jobs", "api_5xx")  # fmt: skip
HEAD = ("store", "wall_s", "jobs", "ranks_run", "kills", "requests_lost_to_kills", "api_5xx",
        "healthz_failing_samples", "settle_s", "violations")  # fmt: skip


def soak_one(store: str, plan: SoakPlan) -> SoakResult:
    with tempfile.TemporaryDirectory() as tmp:
        if store == "sqlite":
            return run_soak(Path(tmp), None, plan)
        with fresh_pg_database() as url:
            return run_soak(Path(tmp), url, plan)


def memory(args: argparse.Namespace) -> int:
    """``--memory``: steady load, no kills, the server's RSS over time (and with ``--trace``,
    tracemalloc's biggest growths by line)."""
    plan = MemoryPlan(seconds=args.minutes * 60, seed=args.seed or 1, warmup_s=args.warmup)
    rows = []
    for store in args.stores.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            trace = Path(tmp) / "trace" if args.trace else None
            keep = Path(args.keep_snapshot + f".{store}") if args.keep_snapshot else None
            if store == "sqlite":
                result = run_memory_soak(Path(tmp), None, plan, trace, keep)
            else:
                with fresh_pg_database() as url:
                    result = run_memory_soak(Path(tmp), url, plan, trace, keep)
        rows.append(result.summary())
    print(" ".join(f"{h:>12.12}" for h in MEMORY_HEAD))
    for row in rows:
        print(" ".join(f"{row[h]!s:>12.12}" for h in MEMORY_HEAD))
        for where, kib, blocks in row["top_growth"]:
            print(f"  {kib:>9.1f} KiB {blocks:>7} blocks  {where}")
        for kind, more in row["type_growth"]:
            print(f"  {more:>9} more {kind}")
    out = Path(args.out) if args.out else MEMORY_RESULTS
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "soak_memory", "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 1 if any(r["api_5xx"] for r in rows) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="chaos time per store")
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--kill-every", type=float, default=20.0, help="mean seconds between kills")
    parser.add_argument("--max-active", type=int, default=40, help="backlog bound, jobs")
    parser.add_argument("--storm-tasks", type=int, default=1000, help="a storm's array size")
    parser.add_argument("--storm-every", type=float, default=45.0, help="mean seconds between")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="steady load without kills; the server's RSS over time",
    )
    parser.add_argument("--trace", action="store_true", help="--memory: with tracemalloc")
    parser.add_argument("--warmup", type=float, default=60.0, help="--memory: s before the fit")
    parser.add_argument("--keep-snapshot", default="", help="--trace: keep the last as PATH.STORE")
    parser.add_argument("--out", default="", help="--memory: the JSON file to write")
    args = parser.parse_args()
    if args.memory:
        return memory(args)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"soak seed {seed}, {args.minutes} min per store", flush=True)
    plan = SoakPlan(seconds=args.minutes * 60, seed=seed, kill_every_s=args.kill_every,
                    max_active=args.max_active, storm_tasks=args.storm_tasks,
                    storm_every_s=args.storm_every)  # fmt: skip
    rows = []
    for store in args.stores.split(","):
        result = soak_one(store, plan)
        rows.append(result.summary())
        print(f"{store}: {json.dumps(result.summary())}", flush=True)
    print(" ".join(f"{h:>12.12}" for h in HEAD))
    for row in rows:
        cells = {**row, "violations": len(row["violations"])}
        print(" ".join(f"{cells[h]!s:>12.12}" for h in HEAD))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "soak", "seed": seed, "rows": rows}, indent=2))
    print(f"wrote {RESULTS}")
    failed = [r for r in rows if r["violations"] or r["api_5xx"]]
    for row in failed:
        print(f"FAILED {row['store']} (seed {seed}): " + "; ".join(row["violations"][:5]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
