"""The shipped Prometheus scrape config and Grafana dashboard agree with what /metrics
emits: the dashboard is valid JSON and every metric its queries name is one a scrape has
(the dcgm-exporter names included); the scrape config sends an admin's bearer token."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from tests.control.loop_helpers import add_job, make_loop, seed_cluster
from tests.control.metrics_helpers import admin_token, scrape

from railyard.control.api.app import create_app
from railyard.control.metrics.gpus import DCGM_NAMES, LABELS
from railyard.control.metrics.prometheus import MetricsConfig
from railyard.control.store.database import Store, sqlite_url

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAME = re.compile(r"\b(railyard_[a-z0-9_]+|DCGM_FI_[A-Z0-9_]+)\b")
BY = re.compile(r"\bby\s*\(([^)]*)\)")


def emitted(tmp_path: Path) -> tuple[set[str], set[str]]:
    """Metric names (families and samples) and label names a real scrape carries."""
    store = Store(sqlite_url(tmp_path / "railyard.db"))
    try:
        seed_cluster(store, gpus=2)
        loop = make_loop(store, tmp_path, gpus=2)
        add_job(store, ["true"], hold="user")  # pending: the pending family has a sample
        loop.step()
        config = MetricsConfig(loop=loop.metrics, loop_health=loop.health)
        app = create_app(store, wake=lambda: None, state_dir=tmp_path, metrics=config)
        client = TestClient(app)
        token = admin_token(store)
        slow = {"check": "compute", "status": "fail", "measured": 35.0, "expected": 95.0}
        reported = client.post(
            "/v1/nodes/node0/health",
            json={"results": [slow]},
            headers={"Authorization": f"Bearer {token}"},
        )  # a health run: the node-health families have samples
        assert reported.status_code == 200, reported.text
        text = scrape(client, token)
    finally:
        store.close()
    names, labels = set(DCGM_NAMES), set(LABELS)
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        for sample in family.samples:
            names.add(sample.name)
            labels.update(sample.labels)
    return names, labels | {"le", "job", "instance"}


def expressions(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            exprs.append(query["query"])
    return exprs


def test_every_metric_the_dashboard_queries_is_one_metrics_emits(tmp_path: Path) -> None:
    dashboard = json.loads((EXAMPLES / "grafana" / "railyard-dashboard.json").read_text())
    names, labels = emitted(tmp_path)
    exprs = expressions(dashboard)
    assert len(exprs) >= 15
    used: set[str] = set()
    for expr in exprs:
        found = set(NAME.findall(expr))
        assert found, f"names no railyard or DCGM metric: {expr}"
        assert found <= names, f"{expr}: {sorted(found - names)} are never emitted"
        used |= found
        for group in BY.findall(expr):
            wanted = {g.strip() for g in group.split(",") if g.strip()}
            assert wanted <= labels, f"{expr}: no label {sorted(wanted - labels)}"
    # what the issue asks a dashboard to show
    assert {
        "railyard_queue_allocated_gpus",
        "railyard_jobs_pending",
        "railyard_scheduler_cycle_duration_seconds_bucket",
        "railyard_job_submit_to_start_seconds_bucket",
        "DCGM_FI_DEV_GPU_UTIL",
        "railyard_loop_step_duration_seconds_bucket",
        "railyard_node_health",
        "railyard_node_health_check_status",
    } <= used
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:  # one measure per panel: the cycle is not the step
        found = set(NAME.findall(" ".join(t["expr"] for t in panel.get("targets", []))))
        assert (
            not {
                "railyard_scheduler_cycle_duration_seconds_bucket",
                "railyard_loop_step_duration_seconds_bucket",
            }
            <= found
        ), panel["title"]


def test_scrape_config_sends_a_bearer_token_from_a_file() -> None:
    config = yaml.safe_load((EXAMPLES / "prometheus" / "prometheus.yml").read_text())
    [job] = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["type"] == "Bearer"
    assert job["authorization"]["credentials_file"].endswith(".token")
    assert job["static_configs"][0]["targets"] == ["127.0.0.1:8765"]
