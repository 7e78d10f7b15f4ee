"""Job numbers (usecases/jobs.py ``_next_number``): a big reservation on PostgreSQL never
holds the counter's lock for the length of its submit."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from railyard.control.store.database import Store
from railyard.control.usecases.jobs import _next_number

pytestmark = pytest.mark.stores


def test_an_arrays_numbers_never_keep_a_single_submit_waiting(store: Store) -> None:
    """While a 1,000-task array's transaction is still open (its rows going in), a single
    submit's number is given at once: on PostgreSQL the array's numbers were reserved and
    committed apart. SQLite has one writer at a time by design (WAL), so only PostgreSQL."""
    if store.is_sqlite:
        pytest.skip("SQLite: one write transaction at a time, whatever the counter")
    with store.session(write=True) as first:  # the counter's row, as the first submit makes it
        assert _next_number(first, 1) == 1
    with store.session(write=True) as array:
        assert _next_number(array, 1000) == 2
        with store.session(write=True) as single:
            single.execute(text("SET LOCAL lock_timeout = '2s'"))
            assert _next_number(single, 1) == 1002
        array.rollback()  # the array failed: its numbers are a gap, as Slurm's ids have
    with store.session(write=True) as later:
        assert _next_number(later, 1) == 1003
