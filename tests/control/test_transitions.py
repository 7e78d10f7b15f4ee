"""Cancel racing the loop: state changes are compare-and-set, so no interleaving of a cancel and
a completion (or a requeue) loses either. Real loop, real processes, both stores.

The interleavings are forced, not hoped for: the API's transaction reads the row before the
loop settles it, or the cancel commits between the loop's read of a row and its write.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from tests.control.loop_helpers import add_job, job, make_loop, seed_cluster, states, step_until

from railyard.control.loop import service as loop
from railyard.control.store.database import Store
from railyard.control.store.tables import EventRow, JobRow, JobState, User
from railyard.control.store.transitions import transition, transition_many
from railyard.control.usecases import jobs
from railyard.control.usecases.nodes import list_nodes
from railyard.exec.protocol import ExitReport
from railyard.sched.lifecycle import Exit, ExitKind, StepInput, StepPlan

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier

PY = sys.executable


def _admin(session: object) -> User:
    user = session.get(User, 1)  # type: ignore[attr-defined]
    assert isinstance(user, User)
    return user


def _gpus_used(store: Store) -> int:
    with store.session() as s:
        return sum(n.gpus_used for n in list_nodes(s, _admin(s)))


def test_transition_applies_only_from_the_expected_states(store: Store) -> None:
    seed_cluster(store)
    first = add_job(store, ["true"])
    second = add_job(store, ["true"], state="running")
    with store.session() as s:
        assert transition(s, first, [JobState.PENDING], {"state": "cancelled"})
        assert not transition(s, first, [JobState.PENDING], {"state": "failed"})
        changed = transition_many(
            s, [first, second], [JobState.RUNNING], {"state": "cancelling"}, attempt=0
        )
        assert changed == [second]
        assert not transition(s, second, [JobState.CANCELLING], {"state": "x"}, attempt=1)
    assert states(store) == {first: "cancelled", second: "cancelling"}


def test_cancel_that_read_running_does_not_undo_a_completion(store: Store, tmp_path: Path) -> None:
    """The API's transaction reads the job as running; the loop completes it; then the cancel
    writes. A read-modify-write would leave it ``cancelling`` with its GPU held forever."""
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    job_id = add_job(store, [PY, "-c", "import time; time.sleep(0.3)"])
    step_until(service, lambda: states(store)[job_id] == "running")
    with store.session() as api:
        stale = api.get(JobRow, job_id)
        assert stale is not None
        assert stale.state == "running"
        step_until(service, lambda: states(store)[job_id] == "completed")
        jobs.cancel_job(api, _admin(api), job_id, time.time())
    assert states(store)[job_id] == "completed"
    service.step()
    assert _gpus_used(store) == 0


@pytest.mark.parametrize(
    ("command", "lost", "final"),
    [
        # the attempt failed, but the user cancelled it between the step's read and write
        (["sh", "-c", "exit 3"], False, "cancelled"),
        # the attempt was lost and would be requeued (retries left): the cancel must win
        (["sh", "-c", "exit 3"], True, "cancelled"),
        # the attempt completed: a cancel that arrives after the fact changes nothing
        (["true"], False, "completed"),
    ],
)
def test_cancel_between_the_loops_read_and_write(
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    lost: bool,
    final: str,
) -> None:
    """The step reads the job as running and settles its exit; the cancel commits before the
    step writes. The settlement (FAILED, or a requeue) must not land on the cancelled row:
    the next step settles the exit again, from CANCELLING."""
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    job_id = add_job(store, command, max_restarts=3)
    plan_step = loop.lifecycle_step
    exit_of = loop.exit_of
    cancelled: list[str] = []

    def as_lost(report: ExitReport, t_s: float | None = None) -> Exit:
        ended = exit_of(report, t_s)
        return replace(ended, kind=ExitKind.LOST) if lost else ended

    def plan_then_cancel(given: StepInput, *args: Any) -> StepPlan:
        plan = plan_step(given, *args)
        if plan.settled and not cancelled:  # the API's cancel commits after the step read
            with store.session() as api:
                jobs.cancel_job(api, _admin(api), job_id, time.time())
            cancelled.append(job_id)
        return plan

    monkeypatch.setattr(loop, "exit_of", as_lost)
    monkeypatch.setattr(loop, "lifecycle_step", plan_then_cancel)
    step_until(service, lambda: JobState(states(store)[job_id]).finished)
    assert cancelled == [job_id]
    row = job(store, job_id)
    assert (row.state, row.restart_count) == (final, 0)
    assert _gpus_used(store) == 0
    with store.session() as s:
        kinds = [e.kind for e in s.scalars(select(EventRow).where(EventRow.job_id == job_id))]
    assert "requeue" not in kinds


def test_signal_death_is_reported_with_the_signal(store: Store, tmp_path: Path) -> None:
    seed_cluster(store)
    service = make_loop(store, tmp_path)
    job_id = add_job(store, ["sh", "-c", "kill -9 $$"])
    step_until(service, lambda: states(store)[job_id] == "failed")
    row = job(store, job_id)
    assert (row.exit_code, row.exit_signal, row.reason) == (None, "SIGKILL", "Signal SIGKILL")


def test_many_row_change_that_loses_a_deadlock_is_rerun(store: Store) -> None:
    """PostgreSQL breaks a deadlock by aborting one side. The other writer holds job B and then
    wants job A; the cancel-like change holds A (ids are taken in order) and waits for B, so it
    waits first and is the one aborted. With ``retry_conflicts`` it re-runs after the other
    writer commits, and every row changes; without it the client would see a 503."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite takes one write lock for the whole store: no deadlock to lose")
    import threading

    seed_cluster(store)
    first, second = add_job(store, ["true"]), add_job(store, ["true"])
    holds_second, done = threading.Event(), threading.Event()

    def other_writer() -> None:
        with store.session() as s:
            transition(s, second, [JobState.PENDING], {"reason": "other"})
            holds_second.set()
            time.sleep(0.3)  # the change below is waiting for ``second`` by now
            transition(s, first, [JobState.PENDING], {"reason": "other"})
        done.set()

    thread = threading.Thread(target=other_writer)
    thread.start()
    assert holds_second.wait(10)
    with store.session() as s:
        changed = transition_many(
            s, [second, first], [JobState.PENDING], {"state": "cancelled"}, retry_conflicts=True
        )
    thread.join(30)
    assert done.is_set(), "the other writer was the one aborted: the race was not forced"
    assert changed == [second, first]
    assert states(store) == {first: "cancelled", second: "cancelled"}
