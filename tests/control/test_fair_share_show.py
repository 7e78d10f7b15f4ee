"""A pending job's record says the fair-share figures it is ordered by (issue 25 item 10): a
job that waits `Priority` behind another queue's can be seen to, level by level."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from railyard.blueprint.partitions import parse_partition
from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import UsageRow
from railyard.control.usecases.partitions import declare_partitions


def app_for(store: Store, tmp_path: Path, token: str, ordering: str) -> TestClient:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, ordering=ordering)
    return TestClient(app, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def seeded(store: Store, tokens: dict[str, str]) -> dict[str, str]:
    with store.session() as session:
        declare_partitions(session, dict(map(parse_partition, ("gpu", "debug"))), time.time())
        for key, gpu_s in {"queue:default": 400.0, "queue:research": 100.0, "queue:gpu": 300.0,
                           "queue:debug": 100.0, "user:gpu/alice": 240.0,
                           "user:gpu/bob": 60.0}.items():  # fmt: skip
            session.add(UsageRow(key=key, gpu_s=gpu_s, updated_t_s=0.0))
    return tokens


def test_a_pending_jobs_figures_level_by_level(
    store: Store, seeded: dict[str, str], tmp_path: Path
) -> None:
    alice = app_for(store, tmp_path, seeded["alice"], "fairshare")
    [job] = alice.post("/v1/jobs", json={"command": ["true"], "queue": "gpu"}).json()
    shown = alice.get(f"/v1/jobs/{job['id']}").json()
    assert shown["fair_share"] == (
        "queue default: 80.0% of usage for 50.0% of weight (1.60); "
        "queue gpu: 75.0% of usage for 50.0% of weight (1.50); "
        "user alice: 80.0% of usage for 50.0% of weight (1.60) (lower goes first)"
    )
    listed = alice.get("/v1/jobs").json()
    assert listed[0]["fair_share"] is None  # the list does not pay for it


def test_not_under_another_ordering(store: Store, seeded: dict[str, str], tmp_path: Path) -> None:
    alice = app_for(store, tmp_path, seeded["alice"], "priority")
    [job] = alice.post("/v1/jobs", json={"command": ["true"], "queue": "gpu"}).json()
    assert alice.get(f"/v1/jobs/{job['id']}").json()["fair_share"] is None
