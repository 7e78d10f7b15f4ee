"""The overview's charts from the store's per-minute steps (migration 0030's triggers), on both
stores: a job's life written as the loop writes it (inserted pending, updated to running,
then ended) moves the lines at the right minutes; the 7-day bars' "today" counts a job that
ran today whether or not an attempt was recorded (issue 60: "today 0%" beside "now 100%")."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update
from tests.control.conftest import FLAVOR

from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, NodeRow, User
from railyard.control.usecases.accounting import daily_utilization
from railyard.control.usecases.history import BUCKETS, history

pytestmark = pytest.mark.stores

NOW = 1_800_000_000.0  # a whole minute, 08:00 UTC
STEP = 6 * 3600.0 / BUCKETS


def edge(k: int) -> float:
    return NOW - 6 * 3600.0 + k * STEP


def test_a_jobs_writes_move_the_lines(store: Store, tokens: dict[str, str]) -> None:
    with store.session() as session:
        alice = session.scalars(select(User).where(User.name == "alice")).one()
        session.add(JobRow(id="1", number=1, user_id=alice.id, queue="default", command=["x"],
                           flavor=FLAVOR, workers=2, gpus_per_worker=4, state="pending",
                           submit_t_s=edge(3) + 30, updated_t_s=edge(3)))  # fmt: skip
    with store.session() as session:
        session.execute(update(JobRow).where(JobRow.id == "1").values(
            state="running", start_t_s=edge(10) + 30, reason="Fits"))  # fmt: skip
    with store.session() as session:
        found = history(session, NOW, total_gpus=16)
    assert found.pending_jobs[:4] == [0.0, 0.0, 0.0, 1.0]
    assert found.pending_jobs[10] == 0.0
    assert found.pending_jobs[9] == 1.0
    assert found.utilization[9] == 0.0
    assert found.utilization[10] == 0.5
    assert found.utilization[-1] == 0.5
    assert found.pending_jobs[-1] == 0.0
    with store.session() as session:
        session.execute(update(JobRow).where(JobRow.id == "1").values(
            state="completed", end_t_s=edge(20) + 30))  # fmt: skip
    with store.session() as session:
        found = history(session, NOW, total_gpus=16)
    assert found.utilization[10:21] == [0.5] * 10 + [0.0]
    assert found.utilization[-1] == 0.0
    assert found.pending_jobs[-1] == 0.0


def test_today_counts_what_ran_today(store: Store, tokens: dict[str, str]) -> None:
    with store.session() as session:
        alice = session.scalars(select(User).where(User.name == "alice")).one()
        gpus = session.scalar(select(NodeRow.gpus).limit(1)) or 0
        total = sum(session.scalars(select(NodeRow.gpus)))
        assert gpus
        assert total
        # every GPU held for two hours of today's eight, by a job that ended, and by one that
        # runs now; no attempts row (what the accounting pages sum): the bars and "now" read
        # the jobs' own rows, as the line does
        session.add(JobRow(id="1", number=1, user_id=alice.id, queue="default", command=["x"],
                           flavor=FLAVOR, workers=1, gpus_per_worker=total, state="completed",
                           submit_t_s=NOW - 5 * 3600, start_t_s=NOW - 5 * 3600,
                           end_t_s=NOW - 4 * 3600, updated_t_s=NOW))  # fmt: skip
        session.add(JobRow(id="2", number=2, user_id=alice.id, queue="default", command=["x"],
                           flavor=FLAVOR, workers=1, gpus_per_worker=total, state="running",
                           submit_t_s=NOW - 3600, start_t_s=NOW - 3600,
                           updated_t_s=NOW))  # fmt: skip
    with store.session() as session:
        week = daily_utilization(session, 7, NOW)
        now = history(session, NOW, total_gpus=total).utilization[-1]
    assert now == 1.0
    assert week[-1][1] == pytest.approx(2 / 8)  # two of the day's eight hours, all GPUs
    assert [u for _, u in week[:-1]] == [0.0] * 6
