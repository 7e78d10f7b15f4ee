"""The long kill -9 campaign: `railyard up` killed at random moments while short jobs run, on
SQLite and PostgreSQL; exactly-once judged from the jobs' own output.

Run: ``python benchmarks/crash_campaign.py [--jobs 1200] [--kills 40] [--stores
sqlite,postgresql]`` (PostgreSQL as in the tests: ``RAILYARD_TEST_PG``); prints a table and
writes ``benchmarks/results/crash_campaign.json``. The default test suite runs a small
campaign (``tests/integration/test_crash_recovery.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.control.conftest import fresh_pg_database
from tests.integration.crash_campaign import run_campaign

RESULTS = Path(__file__).parent / "results" / "crash_campaign.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1200)
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stores", default="sqlite,postgresql")
    args = parser.parse_args()
    rows = []
    for store in args.stores.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            if store == "sqlite":
                result = run_campaign(
                    Path(tmp), None, jobs=args.jobs, kills=args.kills, seed=args.seed
                )
            else:
                with fresh_pg_database() as url:
                    result = run_campaign(
                        Path(tmp), url, jobs=args.jobs, kills=args.kills, seed=args.seed
                    )
        rows.append({"store": store, **result.summary()})
        print(f"{store}: {result.summary()}", flush=True)
    head = ("store", "jobs", "kills", "jobs_lost", "attempts_run_twice", "wall_s")
    print(" ".join(f"{h:>18}" for h in head))
    for row in rows:
        print(" ".join(f"{row[h]!s:>18}" for h in head))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "crash_campaign", "rows": rows}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
