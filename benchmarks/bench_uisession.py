"""What a dashboard request pays to know who is looking: the old cookie's token lookup
(`auth.identify`) against the server-side session's (`uisessions.current`: one joined query),
each in its own transaction as a page does, on SQLite and PostgreSQL. Alternating rounds, the
best round's median, because this machine is shared. Prints a table and writes
benchmarks/results/bench_uisession.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_metrics import open_store
from benchmarks.common import time_runs

from railyard.control.store.database import Store
from railyard.control.store.tables import User
from railyard.control.usecases import auth, uisessions

RESULTS = Path(__file__).parent / "results" / "bench_uisession.json"


def measure(store: Store, rounds: int, repeat: int) -> dict[str, float]:
    now = time.time()
    with store.session() as session:
        user = User(name="bench", is_admin=False, created_t_s=now)
        session.add(user)
        session.flush()
        _, token = auth.issue_token(session, user, "bench", now)
    with store.session() as session:
        session_id, _ = uisessions.open_session(session, token, now)
    assert session_id is not None

    def in_transaction(lookup: Callable[[Session], object]) -> Callable[[], None]:
        def run() -> None:
            with store.session() as session:
                assert lookup(session) is not None

        return run

    ways = {
        "token in the cookie (before)": in_transaction(lambda s: auth.authenticate(s, token, now)),
        "server-side session (now)": in_transaction(
            lambda s: uisessions.current(s, session_id, now + 1)
        ),
    }
    best = {name: float("inf") for name in ways}
    for _ in range(rounds):
        for name, run in ways.items():
            best[name] = min(best[name], statistics.median(time_runs(run, repeat)) * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--stores", default="sqlite,postgresql")
    args = parser.parse_args()
    rows = []
    for kind in args.stores.split(","):
        with tempfile.TemporaryDirectory() as tmp, open_store(kind, Path(tmp)) as store:
            for way, us in measure(store, args.rounds, args.repeat).items():
                rows.append({"store": kind, "lookup": way, "p50_us": us})
    print(f"{'store':<11}{'lookup':<32}{'p50 us':>9}")
    for r in rows:
        print(f"{r['store']:<11}{r['lookup']:<32}{r['p50_us']:>9.0f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
