"""Driver and CUDA versions compared across nodes: each node reports its own (`railyard
health --checks gpu-versions --report`, read through NVML); the control plane fails the odd
node out against the other nodes' last reports, so it is drained with both versions in its
reason, and warns on a tie. Real API, both stores."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tests.control.loop_helpers import seed_cluster
from tests.control.metrics_helpers import admin_token

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import NodeRow

NEW = "driver 550.54.15, CUDA 12.4"
OLD = "driver 535.104.05, CUDA 12.2"


def versions(detail: str) -> dict[str, Any]:
    return {"check": "gpu-versions", "status": "pass", "source": "NVML", "detail": detail}


def test_the_odd_node_out_fails_and_a_tie_warns(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=2)
    with store.session() as s:
        for name in ("b", "c", "d"):
            s.add(NodeRow(name=name, flavor="H100-SXM-80GB", gpus=2, path=["su0", "su0-lg0"],
                          updated_t_s=time.time()))  # fmt: skip
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    admin = TestClient(app, headers={"Authorization": f"Bearer {admin_token(store)}"})

    def report(node: str, detail: str) -> dict[str, Any]:
        done = admin.post(f"/v1/nodes/{node}/health", json={"results": [versions(detail)]})
        assert done.status_code == 200, done.text
        found: dict[str, Any] = done.json()
        return found

    first = report("b", NEW)  # nothing to compare with yet
    assert first["run"]["results"][0]["status"] == "pass"
    tie = report("c", OLD)  # one node each: no majority to follow
    assert tie["run"]["results"][0]["status"] == "warn"
    assert tie["state"] == "ready"
    report("d", NEW)
    odd = report("c", OLD)  # now two nodes run the new driver
    [result] = odd["run"]["results"]
    assert result["status"] == "fail"
    assert result["detail"] == f"{OLD}; 2 of 2 other nodes run {NEW}"
    assert odd["state"] == "draining"
    assert OLD in odd["reason"]
    assert NEW in odd["reason"]
    fixed = report("c", NEW)  # upgraded: resumed
    assert fixed["run"]["results"][0]["status"] == "pass"
    assert fixed["state"] == "ready"
