"""What submits read of the cluster's configuration, kept across transactions.

Every single submit's transaction read the queues, the user's memberships and the nodes
again (admission's checks): under 8 clients that was most of the store's CPU per submit,
while those tables change a few times a day. The store bumps ``counters['config']`` by a
trigger on every change to them (migrations 0026-0027, any process, any path to the store), so a
transaction reads that one number and, while it is the one the kept reads were made under,
uses them instead of reading again (``bulk.once``).

A change committed after a transaction read the number is seen by the next transaction, as
a read made a moment earlier would have missed it too. A store with no such row (emptied
with ``TRUNCATE``) shares nothing: each transaction reads for itself, as before.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy.orm import Session

SHARED = "shared_reads"  # in a session's info: (its transaction, the kept reads)
CONFIG_COUNTER = "config"
MAX_KEPT = 4096  # reads kept under one number (one per job shape: bounded)
_EPOCH_SQL = "SELECT value FROM counters WHERE name = 'config'"


class SharedReads:
    """The reads kept under the config number last seen; :meth:`attach` a transaction."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._epoch: int | None = None
        self._kept: dict[str, Any] = {}

    def attach(self, session: Session) -> None:
        """Let ``session``'s transaction use (and add to) the kept reads, if the config number
        it reads now is the one they were made under; else start them afresh."""
        epoch = config_number(session)
        if epoch is None:
            return
        with self._lock:
            if epoch != self._epoch or len(self._kept) > MAX_KEPT:
                self._epoch, self._kept = int(epoch), {}
            kept = self._kept  # this transaction's: a newer number starts another dict
        session.info[SHARED] = (session.get_transaction(), kept)


def config_number(session: Session) -> int | None:
    """The store's config number now; None if it keeps none (counters emptied by hand)."""
    value = session.connection().exec_driver_sql(_EPOCH_SQL).scalar()
    return None if value is None else int(value)


def shared_of(session: Session) -> dict[str, Any] | None:
    """The kept reads ``session``'s current transaction was attached to, if any."""
    attached = session.info.get(SHARED)
    if attached is None or attached[0] is not session.get_transaction():
        return None
    kept: dict[str, Any] = attached[1]
    return kept
