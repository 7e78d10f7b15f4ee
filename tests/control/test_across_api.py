"""Asking for an across-node sweep through the API: admins only, named nodes must exist and
be checkable, one sweep at a time; the loop then holds the sweep's nodes from new jobs. The
sweep's tests themselves run on a multi-node Ray cluster (tests/multinode/test_ray_sweep.py).
Real store (both databases), real loop and executor."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient
from tests.control.loop_helpers import NODE, add_job, make_loop, seed_cluster, states, stop_all
from tests.control.metrics_helpers import admin_token

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import NodeRow, User
from railyard.control.usecases.auth import issue_token

OTHER = "node-b"


def test_a_sweep_is_asked_by_an_admin_and_holds_its_nodes(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=2)
    with store.session() as s:
        s.add(NodeRow(name=OTHER, flavor="H100-SXM-80GB", gpus=2, path=["su0", "su0-lg0"],
                      updated_t_s=time.time()))  # fmt: skip
        alice = s.get(User, 2)
        assert alice is not None
        alice_token = issue_token(s, alice, "t", time.time())[1]
    loop = make_loop(store, tmp_path, gpus=2)
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, across=loop.across)
    admin = TestClient(app, headers={"Authorization": f"Bearer {admin_token(store)}"})
    alice_api = TestClient(app, headers={"Authorization": f"Bearer {alice_token}"})

    assert admin.get("/v1/health/across").json()["active"] is False
    denied = alice_api.post("/v1/health/across", json={"nodes": [NODE, OTHER]})
    assert denied.status_code == 403
    missing = admin.post("/v1/health/across", json={"nodes": [NODE, "nope"]})
    assert missing.status_code == 404
    assert "nope" in missing.json()["detail"]
    alone = admin.post("/v1/health/across", json={"nodes": [NODE]})
    assert alone.status_code == 422
    assert "2 nodes" in alone.json()["detail"]
    bad = admin.post("/v1/health/across", json={"nodes": ["no/slash"]})
    assert bad.status_code == 422

    try:
        job = add_job(store, ["sleep", "30"], gpus_per_worker=2)
        loop.step()  # the job starts on the one node this executor serves
        assert states(store)[job] == "running"
        asked = admin.post("/v1/health/across", json={})  # no nodes: every ready node
        assert asked.status_code == 202, asked.text
        assert sorted(asked.json()["nodes"]) == sorted([NODE, OTHER])
        again = admin.post("/v1/health/across", json={})
        assert again.status_code == 409
        second = add_job(store, ["true"], gpus_per_worker=2)
        for _ in range(3):  # held: the sweep's nodes take no new job; its group waits for NODE
            report = loop.step()
            assert report.checks == []
        assert states(store)[second] == "pending"
        status = admin.get("/v1/health/across").json()
        assert status["active"]
        assert not status["running"]
        assert sorted(status["group"]) == sorted([NODE, OTHER])

        with store.session() as s:  # a node of the group goes down: the sweep lets go
            row = s.get(NodeRow, OTHER)
            assert row is not None
            row.state, row.reason = "down", "not responding"
        loop.step()
        status = admin.get("/v1/health/across").json()
        assert not status["active"]
        assert status["detail"] == (
            f"stopped: {OTHER} is down (not responding): its group cannot be tested"
        )
    finally:
        stop_all(loop)


def test_periodic_sweeps_cover_the_idle_ready_nodes_only(store: Store, tmp_path: Path) -> None:
    """`--health-across-interval`: at the first step and every interval after, a sweep over
    the ready nodes with nothing on them; fewer than two such nodes, no sweep until the next."""
    from dataclasses import replace

    from railyard.control.loop.service import Loop

    seed_cluster(store, gpus=2)
    with store.session() as s:
        for name in (OTHER, "node-c"):
            s.add(NodeRow(name=name, flavor="H100-SXM-80GB", gpus=2, path=["su0", "su0-lg0"],
                          updated_t_s=time.time()))  # fmt: skip
    base = make_loop(store, tmp_path, gpus=2)
    config = replace(base.config, across_interval_s=3600.0)
    busy = add_job(store, ["sleep", "30"], gpus_per_worker=2)
    base.step()  # the job takes NODE before any sweep is asked
    loop = Loop(store, base.executor, config)
    try:
        assert states(store)[busy] == "running"
        with store.session() as s:  # what the loop's step asks first
            held = loop.across.held(s, time.time())
        assert held == {OTHER, "node-c"}  # not NODE: its job runs
        assert loop.across.sweep is not None
        assert loop.across.sweep.by == "the schedule (--health-across-interval)"
        loop.across.sweep = None  # as if it ended: the next comes an interval later
        with store.session() as s:
            assert loop.across.held(s, time.time()) == frozenset()
            assert loop.across.held(s, time.time() + 3601) == {OTHER, "node-c"}
    finally:
        stop_all(base)
