"""A starting loop seeds the run-time history from the store's completed first attempts
(`control.world`); after that it counts only the ends it writes itself."""

from __future__ import annotations

from tests.control.loop_helpers import add_job, seed_cluster

from railyard.control.loop.world import WorldReader
from railyard.control.store.database import Store
from railyard.sched import SchedulerConfig


def test_a_new_loop_estimates_from_the_runs_already_stored(store: Store) -> None:
    seed_cluster(store)
    done = {"state": "completed", "start_t_s": 100.0, "submit_t_s": 0.0}
    add_job(store, ["true"], **done, end_t_s=120.0)
    add_job(store, ["true"], **done, end_t_s=160.0)
    add_job(store, ["true"], **done, end_t_s=900.0, restart_count=1)  # not a run time
    add_job(store, ["true"], state="timeout", start_t_s=100.0, end_t_s=700.0)
    world = WorldReader(SchedulerConfig())
    with store.session() as session:
        given, _ = world.read(session, 1000.0, [], None)
    assert given.runtime_history_s == {("default", "alice"): 40.0, ("default", None): 40.0}
    with store.session() as session:  # read once: a later store change is not read again
        add_job(store, ["true"], **done, end_t_s=300.0)
        given, _ = world.read(session, 2000.0, [], None)
    assert given.runtime_history_s[("default", "alice")] == 40.0
