"""The alerts page, /metrics and the shipped Prometheus rules name the same alerts and fire on
the same facts (both stores; issue 60, item 7): a stuck job, a job held for a SchedulerError,
a node down and one draining, quotas summing past the cluster. A plain user reads counts,
never another user's job ids. A node's page draws its GPUs' utilisation from the sampler's
readings over the range picked."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import insert, update
from tests.control.conftest import FLAVOR
from tests.control.metrics_helpers import samples, scrape, value
from tests.control.test_dashboard import login, submit
from tests.parts import needs

from railyard.control.api.app import create_app
from railyard.control.metrics.prometheus import MetricsConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, NodeRow, QueueRow, SampleRow
from railyard.control.usecases.alerts import RULES
from railyard.control.usecases.loopstatus import LoopHealth
from railyard.web.routes import router

pytestmark = pytest.mark.stores
RULES_FILE = Path(__file__).parents[2] / "examples" / "grafana" / "railyard-alerts.yml"


def _app(store: Store, tmp_path: Path) -> TestClient:
    health = LoopHealth()
    health.begin(time.time())
    health.ok(time.time())
    metrics = MetricsConfig(open_access=True, loop_health=health)
    return TestClient(create_app(store, wake=lambda: None, state_dir=tmp_path, loop_health=health,
                                 metrics=metrics, extra_routers=[router()]))  # fmt: skip


def _firing(page: str) -> set[str]:
    return set(re.findall(r'<span id="alert-(\w+)">\w+</span></td><td><span '
                          r'class="alert-firing">', page))  # fmt: skip


def test_every_rule_fires_on_its_fact(store: Store, tmp_path: Path,
                                      tokens: dict[str, str]) -> None:  # fmt: skip
    client = _app(store, tmp_path)
    quiet = login(client, tokens["root"]).get("/ui/alerts").text
    assert _firing(quiet) == set()
    assert "None of 7 rules fires" in quiet
    stuck, held = submit(store, "bob"), submit(store, "bob")
    with store.session() as session:
        session.execute(update(JobRow).where(JobRow.id == stuck).values(
            state="cancelling", updated_t_s=time.time() - 3600))  # fmt: skip
        session.execute(update(JobRow).where(JobRow.id == held).values(
            hold="admin", reason="SchedulerError: KeyError 'x'"))  # fmt: skip
        session.execute(update(NodeRow).where(NodeRow.name == "n01").values(state="down"))
        session.execute(update(NodeRow).where(NodeRow.name == "n02").values(state="draining"))
        session.execute(update(QueueRow).where(QueueRow.name == "research").values(
            nominal_gpus={FLAVOR: 16}))  # fmt: skip
    admin = client.get("/ui/alerts").text
    assert _firing(admin) == {"RailyardJobsStuck", "RailyardJobsHeldBySchedulerError",
                              "RailyardNodesDown", "RailyardNodesDraining",
                              "RailyardQuotaOvercommitted"}  # fmt: skip
    assert f"ids {held}" in admin
    assert f"{FLAVOR}: 24 nominal on 16 GPUs" in admin
    user = TestClient(client.app)
    alice = login(user, tokens["alice"]).get("/ui/alerts").text
    assert _firing(alice) == _firing(admin)
    assert f"ids {held}" not in alice
    assert f"(ids {stuck})" not in alice
    found = samples(scrape(TestClient(client.app), None))
    assert value(found, "railyard_quota_overcommit_gpus", flavor=FLAVOR) == 8
    assert value(found, "railyard_loop_held_jobs") == 1
    assert value(found, "railyard_nodes", state="down", flavor=FLAVOR) == 1


def test_the_shipped_rules_are_the_pages_rules() -> None:
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    shipped = {r["alert"]: r["labels"]["severity"] for g in groups for r in g["rules"]}
    assert shipped == {name: severity for name, (severity, _) in RULES.items()}


@needs("promtool")
def test_promtool_accepts_the_shipped_rules() -> None:
    done = subprocess.run(["promtool", "check", "rules", str(RULES_FILE)], capture_output=True,
                          text=True, check=False, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_nodes_utilisation_over_the_range(store: Store, tmp_path: Path,
                                            tokens: dict[str, str]) -> None:  # fmt: skip
    now = time.time()
    rows = [{"job_id": "1", "attempt": 0, "t_s": now - 600 + 10 * i, "node": "n01", "gpu": g,
             "gpu_util_pct": 100.0} for i in range(30) for g in (0, 1)]  # fmt: skip
    rows += [{"job_id": "2", "attempt": 0, "t_s": now - 300, "node": "n02", "gpu": 0,
              "gpu_util_pct": 50.0}]  # fmt: skip
    with store.session() as session:
        session.execute(insert(SampleRow), rows)
    client = login(_app(store, tmp_path), tokens["alice"])
    page = client.get("/ui/nodes/n01", params={"range": "1h"}).text
    gpus = page.split('id="node-gpus">', 1)[1].split("</tbody>", 1)[0]
    shown = re.findall(r'<span class="num">(\d+)</span></td><td><span class="num">(\d+)%', gpus)
    assert len(shown) == 8
    assert shown[2:] == [(str(g), "0") for g in range(2, 8)]
    assert int(shown[0][1]) > 0  # busy in the last 10 of 60 minutes: the buckets it ran in
    assert "GPU utilisation of n01, last hour" in page
    assert 'readings in range</td><td><span class="num">60</span>' in page
    assert client.get("/ui/nodes/nope").status_code == 404
