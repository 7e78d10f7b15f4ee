"""Health checks the scheduler runs itself: a system job on an idle node (real processes,
real `railyard health`), no user's job on that node meanwhile, the run stored and judged."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from sqlalchemy import select
from tests.control.loop_helpers import NODE, add_job, seed_cluster, states, step_until
from tests.parts import needs

from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import HealthRow, NodeRow
from railyard.exec.local import LocalExecutor
from railyard.sched.health import HealthPolicy

QUICK = [sys.executable, "-c", "pass"]


def loop(store: Store, tmp_path: Path, policy: HealthPolicy, checks: tuple[str, ...]) -> Loop:
    config = LoopConfig(
        state_dir=tmp_path, cycle_interval_s=0.1, health=policy, health_checks=checks
    )
    return Loop(store, LocalExecutor(NODE, gpus=2, term_grace_s=2.0), config)


def node(store: Store) -> NodeRow:
    with store.session() as session:
        row = session.get(NodeRow, NODE)
        assert row is not None
        session.expunge(row)
        return row


def runs(store: Store) -> list[tuple[str, str, str]]:
    with store.session() as session:
        rows = session.scalars(select(HealthRow).order_by(HealthRow.t_s, HealthRow.id))
        return [(r.check, r.status, r.reporter) for r in rows]


@needs("kernel-log")  # gpu-xid reads it; unread, the check skips and is not "pass"
def test_a_node_is_checked_before_it_takes_a_job(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=2)
    service = loop(store, tmp_path, HealthPolicy(interval_s=None), ("gpu-xid",))
    job = add_job(store, QUICK)
    first = service.step()
    assert first.checks
    assert first.checks[0].startswith(f"health-{NODE}-")
    assert first.started == []  # the gate: no job before the node's first check
    assert states(store)[job] == "pending"
    step_until(service, lambda: states(store)[job] == "completed")
    assert runs(store) == [("gpu-xid", "pass", "railyard (scheduled)")]
    checked = node(store)
    assert (checked.state, checked.health) == ("ready", "pass")
    assert checked.health_t_s is not None


def test_a_failing_check_drains_the_node_and_its_queue_waits(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=2)
    (tmp_path / "health").mkdir()
    impossible = {"node": NODE, "recorded_t_s": time.time(), "figures": {"compute": 1e6}}
    (tmp_path / "health" / f"{NODE}.json").write_text(json.dumps(impossible))
    service = loop(store, tmp_path, HealthPolicy(interval_s=None), ("compute",))
    job = add_job(store, QUICK)
    step_until(service, lambda: node(store).health is not None, timeout_s=120)
    drained = node(store)
    assert drained.state in ("draining", "drained")
    assert drained.reason.startswith("health: compute ")
    assert "< 0.8 x expected 1e+06 GFLOP/s" in drained.reason
    service.step()
    assert states(store)[job] == "pending"


@needs("kernel-log")
def test_idle_nodes_are_checked_again_each_interval(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=2)
    service = loop(store, tmp_path, HealthPolicy(interval_s=0.5, gate_joins=True), ("gpu-xid",))
    step_until(service, lambda: len(runs(store)) >= 2, timeout_s=60)
    assert {r[1] for r in runs(store)} == {"pass"}
