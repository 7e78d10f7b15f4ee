"""Declared partitions are queues below `default`: a job that names none goes to the default
partition, every member of `default` may use them, they share `default`'s quota, and a
restart with another declaration moves the default (usecases.partitions)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from railyard.blueprint.partitions import parse_partition
from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import QueueRow
from railyard.control.usecases.partitions import declare_partitions
from railyard.sched.model import Queue
from railyard.sched.quota import QuotaTree

SLURM_CONF = (
    "PartitionName=gpu Nodes=ALL Default=YES MaxTime=2-00:00:00 DefaultTime=1:00:00 State=UP",
    "PartitionName=debug Nodes=ALL MaxTime=30:00 DefaultTime=10:00",
)


def declare(store: Store, *lines: str) -> list[str]:
    with store.session() as session:
        return declare_partitions(session, dict(map(parse_partition, lines)), time.time())


@pytest.fixture
def client(store: Store, tokens: dict[str, str], tmp_path: Path) -> dict[str, TestClient]:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    return {n: TestClient(app, headers={"Authorization": f"Bearer {t}"}) for n, t in tokens.items()}


def submit(client: TestClient, **fields: object) -> tuple[int, str]:
    response = client.post("/v1/jobs", json={"command": ["true"], **fields})
    body = response.json()
    return response.status_code, body[0]["queue"] if response.is_success else body["detail"]


def test_a_job_that_names_no_partition_goes_to_the_default_one(
    store: Store, client: dict[str, TestClient]
) -> None:
    assert declare(store, *SLURM_CONF) == [
        "partition gpu declared: a queue below default",
        "partition debug declared: a queue below default",
    ]
    alice = client["alice"]  # a member of `default` only
    assert submit(alice) == (201, "gpu")
    assert submit(alice, queue="default") == (201, "gpu")
    assert submit(alice, queue="debug") == (201, "debug")
    listed = {q["name"]: q for q in client["root"].get("/v1/queues").json()}
    assert (listed["gpu"]["is_default"], listed["debug"]["is_default"]) == (True, False)
    assert (listed["gpu"]["parent"], listed["gpu"]["nominal_gpus"]) == ("default", {})
    assert (listed["debug"]["max_time_s"], listed["debug"]["default_time_s"]) == (1800, 600)


def test_without_a_default_partition_a_job_must_name_one(
    store: Store, client: dict[str, TestClient]
) -> None:
    declare(store, "gpu", "debug")
    status, detail = submit(client["alice"])
    assert status == 422
    assert detail == (
        "queue: queue 'default' has sub-queues (hint: submit to one of ['debug', 'gpu'])"
    )


def test_a_restart_with_another_declaration_moves_the_default(
    store: Store, client: dict[str, TestClient]
) -> None:
    declare(store, *SLURM_CONF)
    client["root"].patch("/v1/queues/debug", json={"weight": 3}).raise_for_status()
    assert declare(store, *SLURM_CONF) == []  # the same declaration changes nothing
    changed = declare(store, "gpu MaxTime=1-00:00:00", "debug Default=YES MaxTime=30:00")
    assert changed == [
        "partition gpu set as declared: default_time_s=None, max_time_s=86400.0, is_default=False",
        "partition debug set as declared: default_time_s=None, is_default=True",
    ]
    assert submit(client["bob"]) == (201, "debug")
    with store.session() as session:
        debug = session.get_one(QueueRow, "debug")
        assert debug.weight == 3  # what the declaration does not say stays the admin's


def test_an_admin_moves_the_default_and_its_sibling_loses_it(
    store: Store, client: dict[str, TestClient]
) -> None:
    declare(store, *SLURM_CONF)
    root = client["root"]
    root.patch("/v1/queues/debug", json={"is_default": True}).raise_for_status()
    listed = {q["name"]: q["is_default"] for q in root.get("/v1/queues").json()}
    assert (listed["gpu"], listed["debug"]) == (False, True)
    assert submit(client["alice"]) == (201, "debug")
    denied = client["alice"].patch("/v1/queues/gpu", json={"is_default": True})
    assert denied.status_code == 403


def test_partitions_share_the_quota_of_default() -> None:
    """No quota of their own, as a Slurm partition has none: each may take all of
    `default`'s, and together no more."""
    queues = [
        Queue("default", nominal_gpus={"h100": 16}),
        Queue("gpu", parent="default"),
        Queue("debug", parent="default"),
    ]
    tree = QuotaTree(queues)
    assert tree.available("gpu", "h100") == tree.available("debug", "h100") == 16
    tree.add("gpu", "h100", 8)
    assert (tree.available("debug", "h100"), tree.fits("debug", "h100", 9)) == (8, False)
