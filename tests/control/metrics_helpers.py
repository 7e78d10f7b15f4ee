"""A live cluster for the /metrics tests, and a scrape parsed back into samples."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from tests.control.loop_helpers import (
    add_job,
    make_loop,
    seed_cluster,
    states,
    step_until,
    stop_all,
)

from railyard.control.loop.service import Loop
from railyard.control.store.database import Store
from railyard.control.store.tables import User
from railyard.control.usecases.auth import issue_token

PY = sys.executable
SLEEP = [PY, "-c", "import time; time.sleep(60)"]


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a scrape by (name, labels)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(
    found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return found[name, frozenset(labels.items())]


def admin_token(store: Store) -> str:
    with store.session() as session:
        admin = session.get(User, 1)
        assert admin is not None
        return issue_token(session, admin, "prometheus", time.time())[1]


class Live:
    """Queues ``default`` (nominal 1 GPU) and ``research`` (3) under ``root`` on one 4-GPU
    node; alice runs a 1-GPU and a 2-GPU job in ``default`` (borrowing 2), a 4-GPU job waits."""

    def __init__(self, store: Store, tmp_path: Path) -> None:
        seed_cluster(store, gpus=4, queues={"default": 1, "research": 3})
        self.store = store
        self.loop: Loop = make_loop(store, tmp_path, gpus=4)
        self.small = add_job(store, SLEEP)
        self.pair = add_job(store, SLEEP, workers=2)
        step_until(self.loop, lambda: states(store)[self.pair] == "running")
        self.big = add_job(store, SLEEP, workers=4)
        self.loop.step()  # looks at the big job: it waits for Resources
        self.token = admin_token(store)

    def stop(self) -> None:
        stop_all(self.loop)


@pytest.fixture
def live(store: Store, tmp_path: Path) -> Iterator[Live]:
    cluster = Live(store, tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()


def scrape(app_client: TestClient, token: str | None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = app_client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return response.text
