"""The overview's six-hour charts against a hand count, on both stores: jobs that waited
(since before the window, an array submitted in it, one cancelled while waiting), one that
waited then ran, one that ended early in the window and one that ended before it."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from tests.control.conftest import FLAVOR

from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, User
from railyard.control.usecases.history import BUCKETS, HISTORY_S, history

pytestmark = pytest.mark.stores

NOW = 1_800_000_000.0
SINCE = NOW - HISTORY_S
STEP = HISTORY_S / BUCKETS


def between(k: int) -> float:
    """Halfway between bucket edges k and k + 1 (edge k is SINCE + k * STEP)."""
    return SINCE + k * STEP + STEP / 2


def add(store: Store, number: int, state: str, gpus: int, submit: float,
        start: float | None = None, end: float | None = None) -> None:  # fmt: skip
    with store.session() as session:
        alice = session.scalars(select(User).where(User.name == "alice")).one()
        session.add(JobRow(id=str(number), number=number, user_id=alice.id, queue="default",
                           command=["x"], flavor=FLAVOR, workers=1, gpus_per_worker=gpus,
                           state=state, submit_t_s=submit, start_t_s=start, end_t_s=end,
                           updated_t_s=submit))  # fmt: skip


def test_six_hours_of_waiting_and_running_by_hand(store: Store, tokens: dict[str, str]) -> None:
    add(store, 1, "pending", 1, SINCE - 3600)  # waits through the whole window
    for n in (2, 3, 4):
        add(store, n, "pending", 1, between(29))  # an array's three tasks
    add(store, 5, "running", 8, between(17), start=between(23))
    add(store, 6, "completed", 4, SINCE - 3 * 3600, start=SINCE - 2 * 3600, end=between(1))
    add(store, 7, "completed", 16, SINCE - 3 * 3600, start=SINCE - 2 * 3600, end=SINCE - 100)
    add(store, 8, "cancelled", 1, between(11), end=between(16))  # cancelled while waiting
    with store.session() as session:
        found = history(session, NOW, total_gpus=16)
    for k in range(1, BUCKETS + 1):  # the point at edge k
        waiting = 1 + 3 * (k >= 30) + (18 <= k <= 23) + (12 <= k <= 16)
        busy = 8 * (k >= 24) + 4 * (k == 1)
        assert found.pending_jobs[k - 1] == waiting, k
        assert found.utilization[k - 1] == busy / 16, k


def test_an_empty_store_has_flat_lines(store: Store, tokens: dict[str, str]) -> None:
    with store.session() as session:
        found = history(session, NOW, total_gpus=16)
    assert found.pending_jobs == [0.0] * BUCKETS
    assert found.utilization == [0.0] * BUCKETS
