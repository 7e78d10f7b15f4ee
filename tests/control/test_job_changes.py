"""The loop reads only the job rows that changed since its last step (``jobs.change_seq``,
`control.store.jobchanges`), so it must never miss one: every column but the loop's reason
counts as a change, a transaction that commits after a younger one is still read, a step
whose transaction failed reads everything again, and rows read twice are not converted
twice. On both stores (the ``store`` fixture), PostgreSQL's own cases on it alone.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select, text, update
from tests.control.loop_helpers import Conversions, add_job, seed_cluster

import railyard.control.loop.world as world
from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store
from railyard.control.store.jobchanges import change_mark, changed_since
from railyard.control.store.tables import JobRow, JobState, NodeRow, User
from railyard.control.store.transitions import transition_where
from railyard.control.submission import JobSubmit
from railyard.control.usecases import jobs
from railyard.sched import NodeState, SchedulerConfig
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.engine import Engine
from railyard.sim.executor import VirtualExecutor
from railyard.sim.workload import FinalState

pytestmark = pytest.mark.stores  # what the store does: both stores in the main tier

UNTRACKED = {"reason", "change_seq"}


def _seq(store: Store, job_id: str) -> int:
    with store.session() as s:
        value = s.scalar(select(JobRow.change_seq).where(JobRow.id == job_id))
        assert value is not None
        return value


def test_every_column_but_the_reason_counts_as_a_change(store: Store) -> None:
    seed_cluster(store)
    job_id = add_job(store, ["x"])
    first = _seq(store, job_id)
    assert first > 0  # an insert is a change
    quote = store.engine.dialect.identifier_preparer.quote
    missed = []
    for column in JobRow.__table__.columns:
        if column.name in UNTRACKED:
            continue
        before = _seq(store, job_id)
        with store.session() as s:  # the same value written back: still a write to the job
            name = quote(column.name)
            s.execute(text(f"UPDATE jobs SET {name} = {name} WHERE id = :i"), {"i": job_id})
        if _seq(store, job_id) <= before:
            missed.append(column.name)
    assert missed == []
    before = _seq(store, job_id)
    with store.session() as s:  # what the loop says of a pending job is no change to it
        s.execute(update(JobRow).where(JobRow.id == job_id).values(reason="Priority"))
    assert _seq(store, job_id) == before
    assert _seq(store, add_job(store, ["y"])) > before


def test_a_change_committed_after_the_mark_is_read_next_time(store: Store) -> None:
    seed_cluster(store)
    old = add_job(store, ["x"])
    with store.session() as s:
        mark = change_mark(s)
    assert mark is not None
    new = add_job(store, ["y"])
    with store.session() as s:
        s.execute(update(JobRow).where(JobRow.id == old).values(hold="user", updated_t_s=1.0))
    with store.session() as s:
        assert sorted(r.id for r in changed_since(s, mark, [JobRow.id])) == sorted([old, new])
    # a later mark leaves both out: at once on SQLite; on PostgreSQL once no transaction older
    # than the writes is open anywhere on the server (its snapshot's xmin is server-wide, and
    # the other test workers' databases share it), so a few tries may be needed
    for _ in range(100):
        with store.session() as s:
            later = change_mark(s)
            assert later is not None
            again = [r.id for r in changed_since(s, later, [JobRow.id])]
        if not again or store.is_sqlite:
            break
        time.sleep(0.05)
    assert again == []


def test_an_older_transaction_that_commits_later_is_not_missed(store: Store) -> None:
    """PostgreSQL numbers a row by its transaction: A writes first and commits last."""
    if store.is_sqlite:
        pytest.skip("SQLite runs one writer at a time: no transaction commits out of order")
    seed_cluster(store)
    first, second = add_job(store, ["x"]), add_job(store, ["y"])
    # a mark past both inserts: while another test worker's transaction is open on the
    # server, a mark stays below it (the snapshot's xmin is server-wide), so wait that out
    for _ in range(100):
        with store.session() as s:
            before = change_mark(s)
            assert before is not None
            if not list(changed_since(s, before, [JobRow.id])):
                break
        time.sleep(0.05)
    with store.engine.connect() as a:
        a.execute(update(JobRow).where(JobRow.id == first).values(priority=3))  # older xid
        with store.session() as b:
            b.execute(update(JobRow).where(JobRow.id == second).values(priority=4))
        with store.session() as s:  # the reader's step: A still runs
            mark = change_mark(s)
            seen = [r.id for r in changed_since(s, before, [JobRow.id])]
        a.commit()
    assert seen == [second]
    assert mark is not None
    with store.session() as s:
        assert first in [r.id for r in changed_since(s, mark, [JobRow.id])]


def test_bulk_writes_number_their_rows_once_and_are_read_after_the_mark(
    store: Store, tmp_path: Path
) -> None:
    """An array's copies carry its first row's number and an update of many rows numbers
    them itself (`jobchanges.numbered`): on SQLite one number each, no row written twice."""
    seed_cluster(store)
    with store.session() as s:
        mark = change_mark(s)
    assert mark is not None
    with store.session() as s:
        alice = s.get(User, 2)
        assert alice is not None
        spec = JobSubmit(command=["true"], gpus=1, queue="default", array="0-49")
        ids = [r.id for r in jobs.submit(s, alice, spec, 1.0, spool_dir=tmp_path / "jobs")]
    with store.session() as s:
        submitted = {
            r.id: r.change_seq for r in changed_since(s, mark, [JobRow.id, JobRow.change_seq])
        }
        later = change_mark(s)
    assert later is not None
    with store.session() as s:
        held = transition_where(s, [JobRow.id.in_(ids)], [JobState.PENDING], {"hold": "user"})
    with store.session() as s:
        changed = {
            r.id: r.change_seq for r in changed_since(s, later, [JobRow.id, JobRow.change_seq])
        }
    assert sorted(submitted) == sorted(held) == sorted(changed) == sorted(ids)
    if store.is_sqlite:
        assert len(set(submitted.values())) == len(set(changed.values())) == 1


def test_a_store_without_its_change_counter_still_writes_and_is_read_whole(
    store: Store, tmp_path: Path
) -> None:
    """SQLite's counter row deleted by hand: writes go on (numbered 0) and the reader, with
    no mark to read changes from, reads every row each time."""
    if not store.is_sqlite:
        pytest.skip("PostgreSQL numbers rows by their transaction: it keeps no counter")
    seed_cluster(store)
    with store.session() as s:
        s.execute(text("DELETE FROM counters WHERE name = 'job_changes'"))
    first = add_job(store, ["x"])
    reader = world.WorldReader(SchedulerConfig(estimate_from_history=False))
    with store.session() as s:
        assert change_mark(s) is None
        reader.read(s, 1.0, [], None)
    with store.session() as s:
        transition_where(s, [JobRow.id == first], [JobState.PENDING], {"priority": 3})
    second = add_job(store, ["y"])
    with store.session() as s:
        given, _ = reader.read(s, 2.0, [], None)
    assert {job.id: job.priority for job in given.pending} == {first: 3, second: 0}


def _virtual_loop(store: Store, tmp_path: Path) -> tuple[Loop, Engine]:
    seed_cluster(store, gpus=4)
    engine = Engine()
    executor = VirtualExecutor(engine, CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0))
    for _ in range(12):  # one GPU, an hour each: 4 run, 8 wait
        job_id = add_job(store, ["x"], submit_t_s=0.0, updated_t_s=0.0)
        executor.register(job_id, 3600.0, 1, FinalState.COMPLETED)
    config = LoopConfig(state_dir=tmp_path, scheduler=SchedulerConfig(estimate_from_history=False))
    return Loop(store, executor, config, clock=lambda: engine.now_t_s), engine


def test_a_failed_step_reads_everything_again(store: Store, tmp_path: Path) -> None:
    """The failed step read its own write, which the rollback took back without a change
    number (on SQLite it gave its number to the next writer, whose row a mark taken after it
    would skip)."""
    loop, engine = _virtual_loop(store, tmp_path)
    engine.now_t_s = 10.0
    loop.step()
    reader = world.WorldReader(SchedulerConfig(estimate_from_history=False))
    with store.session() as s:
        reader.read(s, 10.0, [], None)
    waiting = sorted(job_id for job_id, state in _states(store).items() if state == "pending")

    def failing_step() -> None:
        with reader.committing(), store.session() as s:
            s.execute(update(JobRow).where(JobRow.id == waiting[0]).values(priority=5))
            reader.read(s, 20.0, [], None)
            raise RuntimeError("the step's write failed")

    with pytest.raises(RuntimeError, match="write failed"):
        failing_step()
    with store.session() as s:  # another writer, after the rollback
        s.execute(update(JobRow).where(JobRow.id == waiting[1]).values(hold="user"))
    with store.session() as s:
        given, _ = reader.read(s, 30.0, [], None)
    pending = {job.id: job for job in given.pending}
    assert pending[waiting[1]].hold == "user"
    assert pending[waiting[0]].priority == 0


def test_quiet_steps_read_no_node_and_a_drain_is_read(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop, engine = _virtual_loop(store, tmp_path)
    for t_s in (10.0, 20.0):
        engine.now_t_s = t_s
        loop.step()
    counted = Conversions(monkeypatch)
    engine.now_t_s = 30.0
    loop.step()
    assert (counted.jobs, counted.nodes) == (0, 0)
    with store.session() as s:
        s.execute(update(NodeRow).values(state=NodeState.DRAINING.value, updated_t_s=35.0))
    engine.now_t_s = 40.0
    loop.step()
    assert counted.nodes == 1
    assert loop.last_plan is not None
    assert {r.value for r in loop.last_plan.reasons.values()} == {"ReqNodeNotAvail"}


def test_rows_read_again_behind_a_long_transaction_are_not_converted_again(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction left open keeps PostgreSQL's mark where it was: every row changed since
    is read at each step, and only the one that changed is converted."""
    loop, engine = _virtual_loop(store, tmp_path)
    engine.now_t_s = 10.0
    loop.step()
    waiting = sorted(job_id for job_id, state in _states(store).items() if state == "pending")
    counted = Conversions(monkeypatch)
    per_step = []
    with store.engine.connect() as idle:
        if not store.is_sqlite:
            idle.execute(text("SELECT pg_current_xact_id()"))  # holds an id, writes nothing
        for n, job_id in enumerate(waiting[:4]):
            with store.session() as s:
                s.execute(update(JobRow).where(JobRow.id == job_id).values(priority=n + 1))
            counted.jobs = 0
            engine.now_t_s = 20.0 + 10 * n
            loop.step()
            per_step.append(counted.jobs)
        idle.rollback()
    assert per_step == [1, 1, 1, 1]


def _states(store: Store) -> dict[str, str]:
    with store.session() as s:
        return {r.id: r.state for r in s.execute(select(JobRow.id, JobRow.state))}
