"""``GET /metrics`` over a real store and a real service loop running real processes: the
figures a scrape reports are the store's, parsed back with prometheus_client's own parser;
only an admin's token (or ``--metrics-open``) reads them. On SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select
from tests.control.metrics_helpers import Live, live, samples, scrape, value
from tests.parts import needs

from railyard.control.api.app import create_app
from railyard.control.metrics.prometheus import MetricsConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import QueueRow, UsageRow
from railyard.control.usecases.overview import reason_label
from railyard.control.usecases.queueviews import entitlements

__all__ = ["live"]  # the fixture


def test_a_scrape_reports_what_the_store_holds(live: Live, tmp_path: Path) -> None:
    config = MetricsConfig(loop=live.loop.metrics, loop_health=live.loop.health)
    app = create_app(live.store, wake=lambda: None, state_dir=tmp_path, metrics=config)
    found = samples(scrape(TestClient(app), live.token))

    assert value(found, "railyard_jobs", queue="default", state="running") == 2
    assert value(found, "railyard_jobs", queue="default", state="pending") == 1
    assert value(found, "railyard_jobs", queue="research", state="running") == 0
    assert value(found, "railyard_jobs_pending", queue="default", reason="Resources") == 1
    # nothing waits in research: zeros, so an alert on it reads 0 rather than no data
    assert value(found, "railyard_jobs_pending", queue="research", reason="Resources") == 0
    assert value(found, "railyard_jobs_pending", queue="research", reason="Priority") == 0
    flavor = "virtual"
    assert value(found, "railyard_queue_allocated_gpus", queue="default", flavor=flavor) == 3
    assert value(found, "railyard_queue_allocated_gpus", queue="research", flavor=flavor) == 0
    assert value(found, "railyard_queue_borrowed_gpus", queue="default", flavor=flavor) == 2
    assert value(found, "railyard_queue_borrowed_gpus", queue="root", flavor=flavor) == 0
    assert value(found, "railyard_queue_nominal_gpus", queue="research", flavor=flavor) == 3
    assert value(found, "railyard_nodes", state="ready", flavor=flavor) == 1
    assert value(found, "railyard_nodes", state="drained", flavor=flavor) == 0
    assert value(found, "railyard_node_gpus", state="ready", flavor=flavor) == 4
    with live.store.session() as session:
        usage = {r.key: r.gpu_s for r in session.scalars(select(UsageRow))}
    assert usage["queue:default"] > 0
    assert (
        value(found, "railyard_queue_fairshare_usage_gpu_seconds", queue="default")
        == (usage["queue:default"])
    )
    assert (
        value(found, "railyard_user_fairshare_usage_gpu_seconds", queue="default", user="alice")
        == (usage["user:default/alice"])
    )
    assert value(found, "railyard_queue_fairshare_usage_ratio", queue="default") == 1.0
    assert value(found, "railyard_queue_fairshare_entitlement_ratio", queue="root") == 1.0
    assert value(found, "railyard_queue_fairshare_entitlement_ratio", queue="default") == 0.5
    # the loop's own measurements: every step, and the two first starts
    steps = value(found, "railyard_scheduler_cycle_duration_seconds_count")
    assert steps >= 2
    assert value(found, "railyard_loop_step_duration_seconds_count") == steps
    assert value(found, "railyard_job_submit_to_start_seconds_count") == 2
    assert value(found, "railyard_job_submit_to_start_seconds_bucket", le="+Inf") == 2
    assert value(found, "railyard_loop_step_failures_total") == 0
    assert value(found, "railyard_loop_consecutive_failed_steps") == 0


def test_only_an_admin_token_reads_metrics_unless_open(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    client = TestClient(create_app(store, wake=lambda: None, state_dir=tmp_path))
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json() == {"detail": "missing bearer token"}
    bad = client.get("/metrics", headers={"Authorization": "Bearer ry_nope"})
    assert (bad.status_code, bad.json()["detail"]) == (401, "invalid or revoked token")
    alice = client.get("/metrics", headers={"Authorization": f"Bearer {tokens['alice']}"})
    assert alice.status_code == 403
    assert alice.json()["detail"].startswith("user 'alice' is not an admin")
    alice_api = TestClient(client.app, headers={"Authorization": f"Bearer {tokens['alice']}"})
    for _ in range(3):
        assert alice_api.post("/v1/jobs", json={"command": ["true"], "gpus": 2}).status_code == 201
    found = samples(scrape(client, tokens["root"]))
    assert value(found, "railyard_jobs", queue="default", state="pending") == 3
    assert value(found, "railyard_jobs_pending", queue="default", reason="None") == 3
    assert value(found, "railyard_node_gpus", state="ready", flavor="H100-SXM-80GB") == 16
    opened = create_app(
        store, wake=lambda: None, state_dir=tmp_path, metrics=MetricsConfig(open_access=True)
    )
    assert "railyard_jobs" in scrape(TestClient(opened), None)


def test_reason_labels_and_entitlements() -> None:
    assert reason_label("") == "None"
    assert reason_label("Resources") == "Resources"
    assert reason_label("Preempted (Reclaim for 12)") == "Preempted"
    shape = {"root": (None, 1.0), "a": ("root", 1.0), "b": ("root", 3.0), "b1": ("b", 1.0)}
    shape["b2"] = ("b", 1.0)
    queues = [
        QueueRow(name=name, parent=parent, weight=weight, nominal_gpus={},
                 borrowing_limit_gpus={}, lending_limit_gpus={})
        for name, (parent, weight) in shape.items()
    ]  # fmt: skip
    assert entitlements(queues) == {"root": 1.0, "a": 0.25, "b": 0.75, "b1": 0.375, "b2": 0.375}


@needs("promtool")
def test_promtool_accepts_the_exposition(live: Live, tmp_path: Path) -> None:
    config = MetricsConfig(loop=live.loop.metrics, loop_health=live.loop.health)
    app = create_app(live.store, wake=lambda: None, state_dir=tmp_path, metrics=config)
    client = TestClient(app, headers={"Authorization": f"Bearer {live.token}"})
    run = {"check": "memory", "status": "warn", "measured": 8.5, "expected": 10.0, "unit": "GB/s"}
    reported = client.post("/v1/nodes/node0/health", json={"results": [run]})
    assert reported.status_code == 200, reported.text
    text = scrape(TestClient(app), live.token)
    assert 'railyard_node_health_check_ratio{check="memory",node="node0"} 0.85' in text
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
