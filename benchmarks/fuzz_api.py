"""The long schemathesis campaign: every operation of ``/openapi.json``, positive and negative
cases, as an admin and as a plain user, on SQLite and PostgreSQL, counting requests, 5xx and
schema violations.

Run: ``python benchmarks/fuzz_api.py [--examples 300] [--stores sqlite,postgresql]``; prints a
table and the distinct failures, and writes ``benchmarks/results/fuzz_api.json``. The default
test suite runs a small campaign (``tests/integration/test_openapi_fuzz.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.control.conftest import Seeder, fresh_pg_database
from tests.integration.fuzz_api import FuzzReport, fuzz

from railyard.control.api.app import create_app
from railyard.control.store.database import Store, sqlite_url

RESULTS = Path(__file__).parent / "results" / "fuzz_api.json"


def campaign(url: str, state_dir: Path, examples: int, seed: int) -> dict[str, FuzzReport]:
    store = Store(url)
    try:
        tokens = Seeder(store).cluster()
        app = create_app(store, wake=lambda: None, state_dir=state_dir)
        return {
            who: fuzz(app, tokens[who], examples=examples, fuzz_seed=seed)
            for who in ("alice", "root")
        }
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=300, help="per operation and mode")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stores", default="sqlite,postgresql")
    args = parser.parse_args()
    rows = []
    for store in args.stores.split(","):
        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            if store == "sqlite":
                url = sqlite_url(Path(tmp) / "railyard.db")
                reports = campaign(url, Path(tmp), args.examples, args.seed)
            else:
                with fresh_pg_database() as url:
                    reports = campaign(url, Path(tmp), args.examples, args.seed)
        for who, report in reports.items():
            rows.append(
                {
                    "store": store,
                    "as": "admin" if who == "root" else "user",
                    "requests": report.requests,
                    "5xx": report.server_errors,
                    "distinct_failures": len(report.failures),
                    "statuses": dict(sorted(report.statuses.items())),
                    "failures": report.failures,
                    "wall_s": round(time.perf_counter() - began, 1),
                }
            )
            for key, example in report.failures.items():
                print(f"  {store} {who}: {key}\n      {example[:400]}")
    print(f"{'store':>10} {'as':>6} {'requests':>9} {'5xx':>5} {'failures':>9}")
    for row in rows:
        print(
            f"{row['store']:>10} {row['as']:>6} {row['requests']:>9} {row['5xx']:>5} "
            f"{row['distinct_failures']:>9}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "fuzz_api", "rows": rows}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
