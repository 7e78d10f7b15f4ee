"""Shares of attempts lost with their node agent, kept in the store (`KeepsLostShares`).

A Ray node agent can die while the ranks it started live on (its raylet restarted): the
attempt is a node failure and runs again, and the executor keeps the node out of use until an
agent there has ended the old ranks. That memory was the executor's alone, so a control plane
restarted meanwhile (or a standby that took over) placed the next attempt on the node as soon
as it rejoined, beside the old ranks on the same GPUs (issue 55). Here each lost share is
written to ``lost_shares`` before the step that settles its attempt commits, deleted once the
executor has ended it, and given back to the executor when a control plane starts.
"""

from __future__ import annotations

import logging

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from railyard.control.store.database import Store
from railyard.control.store.tables import LostShareRow
from railyard.exec.protocol import Executor, JobHandle, KeepsLostShares

log = logging.getLogger("railyard.loop")


def _node(share: JobHandle) -> str:
    return share.workers[0].node


class LostShareBook:
    """Carries the executor's changes until they are written; one thread (the loop's)."""

    def __init__(self, store: Store, executor: Executor) -> None:
        self.store = store
        self.executor = executor if isinstance(executor, KeepsLostShares) else None
        self._lost: list[JobHandle] = []
        self._ended: list[JobHandle] = []

    def restore(self, session: Session) -> int:
        """Give the executor the shares a previous control plane lost; how many."""
        if self.executor is None:
            return 0
        rows = session.scalars(select(LostShareRow)).all()
        shares = [JobHandle.from_dict(r.handle) for r in rows]
        if shares:
            named = ", ".join(sorted({f"{s.job_id} on {_node(s)}" for s in shares}))
            log.warning("%d share(s) of attempts lost with their node agent are ended before "
                        "their nodes take a job: %s", len(shares), named)  # fmt: skip
            self.executor.remember_lost(shares)
        return len(shares)

    def sync(self, now_t_s: float) -> None:
        """Write what the executor lost or ended since the last call, in a transaction of its
        own, before the step settles the exits polled with it (a lost share's attempt is
        settled as a node failure in the step's transaction, after this one). A failure
        raises: the step fails, and its exits and these changes are carried to the next."""
        if self.executor is None:
            return
        changed = self.executor.lost_shares()
        self._lost.extend(changed.lost)
        self._ended.extend(changed.ended)
        if not self._lost and not self._ended:
            return
        with self.store.session(write=True) as session:
            for share in self._lost:
                session.merge(LostShareRow(job_id=share.job_id, restart_count=share.restart_count,
                                           node=_node(share), handle=share.to_dict(),
                                           lost_t_s=now_t_s))  # fmt: skip
            session.flush()
            for share in self._ended:
                session.execute(delete(LostShareRow).where(
                    LostShareRow.job_id == share.job_id,
                    LostShareRow.restart_count == share.restart_count,
                    LostShareRow.node == _node(share)))  # fmt: skip
        self._lost, self._ended = [], []
