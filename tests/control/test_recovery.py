"""A restart after losing the jobs' directory (logs, scripts, checkpoints) while the control
plane was down: running jobs are adopted and finish once, with their real outcome, because
what decides that (start markers, exit records) lives apart, in ``<state_dir>/attempts``.
The crash is a loop and executor dropped without a word (a kill -9 leaves just that)."""

from __future__ import annotations

import gc
import shutil
import sys
import time
from pathlib import Path

import pytest
from tests.control.loop_helpers import add_job, job, make_loop, seed_cluster, states, step_until

from railyard.control.store.database import Store

# Touch argv[1].<job>.up, append "<job> <attempt>" to argv[1] after argv[2] seconds; exit with
# argv[3].
RUN = """
import os, sys, time
open(sys.argv[1] + "." + os.environ["RAILYARD_JOB_ID"] + ".up", "w").close()
time.sleep(float(sys.argv[2]))
with open(sys.argv[1], "a") as f:
    f.write(f"{os.environ['RAILYARD_JOB_ID']} {os.environ['RAILYARD_RESTART_COUNT']}\\n")
sys.exit(int(sys.argv[3]))
"""


@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.parametrize("ends_while_down", [False, True])
def test_losing_the_job_directory_runs_nothing_twice(
    store: Store, tmp_path: Path, ends_while_down: bool
) -> None:
    seed_cluster(store)
    out = tmp_path / "out"
    first = make_loop(store, tmp_path)
    ok = add_job(store, [sys.executable, "-c", RUN, str(out), "1.0", "0"])
    bad = add_job(store, [sys.executable, "-c", RUN, str(out), "1.0", "3"])
    step_until(first, lambda: set(states(store).values()) == {"running"})
    # running commands, not only launched wrappers (which still read their task file there)
    up = [tmp_path / f"out.{j}.up" for j in (ok, bad)]
    step_until(first, lambda: all(p.exists() for p in up))
    del first
    gc.collect()
    shutil.rmtree(tmp_path / "jobs")
    if ends_while_down:  # both end, and their wrappers record it, before the restart
        records = [tmp_path / "attempts" / j / "rank-0.restart-0.exit.json" for j in (ok, bad)]
        deadline = time.monotonic() + 30
        while not all(r.exists() for r in records) and time.monotonic() < deadline:
            time.sleep(0.05)
    second = make_loop(store, tmp_path)
    second.reconcile()
    step_until(second, lambda: {states(store)[ok], states(store)[bad]} <= {"completed", "failed"})
    assert (job(store, ok).state, job(store, ok).exit_code) == ("completed", 0)
    assert (job(store, bad).state, job(store, bad).exit_code) == ("failed", 3)
    assert sorted(out.read_text().splitlines()) == sorted([f"{ok} 0", f"{bad} 0"])
