"""Node health through the API and the live loop: a run is stored, judged by the rule in
`railyard.sched.health`, and acts on the node: a fatal error takes it down and the loop
requeues the job on it, a later passing run resumes it and the job starts again; history and
/metrics show the runs. Real store (both databases), real loop, real processes."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from tests.control.loop_helpers import (
    NODE,
    add_job,
    make_loop,
    seed_cluster,
    states,
    step_until,
    stop_all,
)
from tests.control.metrics_helpers import admin_token, samples, scrape, value

from railyard.control.api.app import create_app
from railyard.control.loop.service import Loop
from railyard.control.store.database import Store
from railyard.control.store.tables import EventRow, HealthRow, JobRow, NodeRow, User
from railyard.control.usecases.auth import issue_token

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
PASS = {"check": "compute", "status": "pass", "measured": 97.0, "expected": 95.0,
        "unit": "GFLOP/s", "fail_below": 0.8, "warn_below": 0.9, "source": "baseline"}  # fmt: skip
SLOW = {**PASS, "status": "fail", "measured": 35.0}
XID = {"check": "gpu-xid", "status": "fail", "fatal": True,
       "detail": "XID 79 on GPU 1 (fallen off the bus)"}  # fmt: skip


class Cluster:
    def __init__(self, store: Store, tmp_path: Path, *, fail_requeues: bool = False) -> None:
        seed_cluster(store, gpus=2)
        self.store = store
        self.loop: Loop = make_loop(store, tmp_path, gpus=2)
        app = create_app(
            store, wake=lambda: None, state_dir=tmp_path, health_fail_requeues=fail_requeues
        )
        self.admin = TestClient(app, headers={"Authorization": f"Bearer {admin_token(store)}"})
        with store.session() as session:
            alice = session.get(User, 2)
            assert alice is not None
            alice_token = issue_token(session, alice, "t", time.time())[1]
        self.alice = TestClient(app, headers={"Authorization": f"Bearer {alice_token}"})

    def report(self, *results: dict[str, Any], who: TestClient | None = None) -> Any:
        response = (who or self.admin).post(
            f"/v1/nodes/{NODE}/health", json={"results": list(results)}
        )
        assert response.status_code == 200, response.text
        return response.json()

    def node(self) -> NodeRow:
        with self.store.session() as session:
            row = session.get(NodeRow, NODE)
            assert row is not None
            session.expunge(row)
            return row

    def job(self, job_id: str) -> JobRow:
        with self.store.session() as session:
            row = session.get(JobRow, job_id)
            assert row is not None
            session.expunge(row)
            return row

    def stop(self) -> None:
        stop_all(self.loop)


@pytest.fixture
def cluster(store: Store, tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(store, tmp_path)
    try:
        yield made
    finally:
        made.stop()


def test_a_fatal_error_requeues_the_job_and_a_pass_brings_the_node_back(cluster: Cluster) -> None:
    job = add_job(cluster.store, SLEEP, workers=2)
    step_until(cluster.loop, lambda: states(cluster.store)[job] == "running")

    done = cluster.report(PASS, XID)
    assert done["run"]["verdict"] == "fatal"
    assert done["state"] == "down"
    assert done["reason"] == "health: gpu-xid: XID 79 on GPU 1 (fallen off the bus)"
    assert done["action"].endswith("; 1 job(s) on it requeued")
    step_until(cluster.loop, lambda: cluster.job(job).state == "pending")
    requeued = cluster.job(job)
    assert requeued.restart_count == 1
    assert requeued.reason == "Requeued (NodeFail)"
    step_until(cluster.loop, lambda: cluster.job(job).reason == "ReqNodeNotAvail")  # no node
    assert not cluster.loop.executor.running()

    back = cluster.report(PASS)
    assert back["state"] == "ready"
    assert back["action"] == f"{NODE} resumed: no check failed"
    step_until(cluster.loop, lambda: states(cluster.store)[job] == "running")
    assert cluster.job(job).restart_count == 1


def test_a_failure_drains_and_the_job_finishes_there(cluster: Cluster) -> None:
    job = add_job(cluster.store, SLEEP, workers=1)
    step_until(cluster.loop, lambda: states(cluster.store)[job] == "running")
    done = cluster.report(SLOW)
    assert done["state"] == "draining"
    assert done["reason"] == "health: compute 35 GFLOP/s < 0.8 x expected 95 GFLOP/s"
    cluster.loop.step()
    assert states(cluster.store)[job] == "running"  # a drain lets running jobs finish
    assert cluster.node().state == "draining"


def test_requeue_on_failure_when_the_server_asks_for_it(store: Store, tmp_path: Path) -> None:
    made = Cluster(store, tmp_path, fail_requeues=True)
    try:
        job = add_job(store, SLEEP, workers=1)
        step_until(made.loop, lambda: states(store)[job] == "running")
        assert made.report(SLOW)["state"] == "down"
        step_until(made.loop, lambda: made.job(job).state == "pending")
        assert made.job(job).restart_count == 1
    finally:
        made.stop()


def test_an_admins_drain_is_left_alone_and_said_so(cluster: Cluster) -> None:
    cluster.admin.post(f"/v1/nodes/{NODE}/drain", json={"reason": "new NIC firmware"})
    done = cluster.report(PASS)
    assert done["state"] == "draining"
    assert done["reason"] == "new NIC firmware"
    assert done["action"] == f"{NODE} left draining"
    failed = cluster.report(SLOW)
    assert failed["action"] == f"{NODE} left draining (new NIC firmware; not health's to change)"


def test_history_newest_first_and_visible_to_users(cluster: Cluster) -> None:
    cluster.report(SLOW)
    cluster.report(PASS, {"check": "gpu-inventory", "status": "skip", "detail": "no NVML"})
    runs = cluster.alice.get(f"/v1/nodes/{NODE}/health", params={"limit": 5}).json()
    assert [r["verdict"] for r in runs] == ["pass", "fail"]
    assert [c["check"] for c in runs[0]["results"]] == ["compute", "gpu-inventory"]
    assert runs[1]["results"][0]["ratio"] == pytest.approx(35 / 95)
    assert len(cluster.alice.get(f"/v1/nodes/{NODE}/health", params={"limit": 1}).json()) == 1
    nodes = cluster.alice.get("/v1/nodes").json()
    assert nodes[0]["health"] == "pass"
    with cluster.store.session() as session:
        assert session.scalars(select(EventRow.message)).all()[-1].startswith("health: node ")


def test_metrics_show_the_last_run(cluster: Cluster) -> None:
    cluster.report(SLOW, {"check": "memory", "status": "pass", "measured": 10.0, "expected": 9.0})
    found = samples(scrape(cluster.admin, None))
    assert value(found, "railyard_node_health", node=NODE, verdict="fail") == 1.0
    assert value(found, "railyard_node_health", node=NODE, verdict="pass") == 0.0
    assert value(found, "railyard_node_health_check_status", node=NODE, check="compute") == 2.0
    assert value(found, "railyard_node_health_check_status", node=NODE, check="memory") == 0.0
    ratio = value(found, "railyard_node_health_check_ratio", node=NODE, check="compute")
    assert ratio == pytest.approx(35 / 95)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"results": []}, "results"),
        ({"results": [{**PASS, "status": "great"}]}, "status"),
        ({"results": [{**PASS, "measured": -1}]}, "measured"),
        ({"results": [{**PASS, "fail_below": 2}]}, "fail_below"),
        ({"results": [{**PASS, "check": "Compute!"}]}, "check"),
        ({"results": [{**PASS, "colour": "red"}]}, "colour"),
        ({"results": [PASS] * 65}, "results"),
    ],
)
def test_bad_reports_are_refused_and_nothing_is_stored(
    cluster: Cluster, body: dict[str, Any], field: str
) -> None:
    response = cluster.admin.post(f"/v1/nodes/{NODE}/health", json=body)
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"]
    with cluster.store.session() as session:
        assert session.scalars(select(HealthRow)).all() == []
    assert cluster.node().state == "ready"


def test_only_admins_report_and_unknown_nodes_are_404(cluster: Cluster) -> None:
    refused = cluster.alice.post(f"/v1/nodes/{NODE}/health", json={"results": [SLOW]})
    assert refused.status_code == 403
    assert cluster.node().state == "ready"
    missing = cluster.admin.post("/v1/nodes/nope/health", json={"results": [PASS]})
    assert missing.status_code == 404
    assert "no node 'nope'" in missing.json()["detail"]
    assert cluster.alice.get("/v1/nodes/nope/health").status_code == 404
