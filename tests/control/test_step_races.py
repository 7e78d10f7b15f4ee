"""What the API commits while a loop step is deciding: the step read a job unheld on a ready
node, then a hold or a drain committed, then the step wrote its start. The start's
compare-and-set must see it (Slurm: a held job never starts; a draining node takes no new
work), or the API answers "held" or "draining" while the job starts anyway. Found while
writing the soak's checks; ``benchmarks/soak.py --seed 7 --stores postgresql`` then caught the
hold race (4 array tasks started while held) without this fix. SQLite and PostgreSQL, a real
LocalExecutor."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from tests.control.loop_helpers import NODE, add_job, job, make_loop, seed_cluster

from railyard.control.loop.world import WorldReader
from railyard.control.store.database import Store
from railyard.control.store.tables import User
from railyard.control.usecases import jobs, nodes

pytestmark = pytest.mark.stores  # a race between transactions: both stores in the main tier
Change = Callable[[Session, str], object]


def _hold(session: Session, job_id: str) -> object:
    alice = session.scalars(select(User).where(User.name == "alice")).one()
    return jobs.hold_job(session, alice, job_id, 0.0)


def _drain(session: Session, _: str) -> object:
    admin = session.scalars(select(User).where(User.name == "admin")).one()
    return nodes.drain_node(session, admin, NODE, "maintenance", 0.0)


class ChangeAfterRead(WorldReader):
    """Reads the world, then commits ``change`` in a transaction of its own (the API's)."""

    def __init__(self, inner: WorldReader, store: Store, job_id: str, change: Change) -> None:
        self.inner, self.store, self.job_id, self.change = inner, store, job_id, change

    def read(self, *args: Any, **kw: Any) -> Any:
        seen = self.inner.read(*args, **kw)
        with self.store.session(write=True) as session:
            self.change(session, self.job_id)
        return seen

    def wrote(self, reasons: Any) -> None:
        self.inner.wrote(reasons)


@pytest.mark.parametrize("change", [_hold, _drain], ids=["hold", "drain"])
def test_a_change_committed_during_a_step_keeps_the_job_from_starting(
    store: Store, tmp_path: Path, change: Change
) -> None:
    seed_cluster(store, gpus=4)
    job_id = add_job(store, ["true"])
    loop = make_loop(store, tmp_path)
    loop._world = ChangeAfterRead(loop._world, store, job_id, change)  # type: ignore[assignment]
    loop.step()
    row = job(store, job_id)
    assert (row.state, row.placement, row.start_t_s) == ("pending", None, None)
