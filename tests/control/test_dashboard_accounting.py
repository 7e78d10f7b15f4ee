"""The dashboard's accounting page and its CSV (both stores): GPU-hours per group and day
against a hand count, queues beside their nominal quota, a user's own usage only."""

from __future__ import annotations

import csv
import io
import re
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.control.test_dashboard import app_for, login

from railyard.control.store.database import Store
from railyard.control.store.usagedays import Ended, record_attempts

pytestmark = pytest.mark.stores


@pytest.fixture
def client(store: Store, tmp_path: Path, tokens: dict[str, str]) -> TestClient:
    now = time.time()
    # The day before yesterday, 00:00 UTC: bob's run ends at 01:00 yesterday, in the past
    # whatever the time now (from yesterday at 00:00 it ended in the future before 01:00,
    # and the page, which counts up to now, showed less).
    start = now - now % 86400 - 2 * 86400
    with store.session() as session:
        record_attempts(session, [  # alice: 2 GPUs 06:00-09:00 that day; bob: 8, 23:00-01:00
            Ended("1", 0, "alice", "default", 2, start + 6 * 3600, start + 9 * 3600, "completed"),
            Ended("2", 0, "bob", "research", 8, start + 23 * 3600, start + 25 * 3600,
                  "completed"),
        ])  # fmt: skip
    return app_for(store, tmp_path)


def _cells(html: str, key: str) -> list[str]:
    row = re.search(rf"<tr><td>{key}</td>(.*?)</tr>", html)
    assert row is not None, html
    return re.findall(r'<span class="num">([^<]*)</span>', row.group(1))


def test_gpu_hours_per_user_and_day(client: TestClient, tokens: dict[str, str]) -> None:
    login(client, tokens["root"])
    page = client.get("/ui/accounting", params={"days": 7, "by": "user"})
    assert page.status_code == 200
    assert 'href="/ui/accounting" class=on' in page.text
    bob = _cells(page.text, "bob")  # 8 GPU-h on each of two days, 16 in all
    assert bob[-4:-1] == ["8.00", "8.00", "16.00"]
    alice = _cells(page.text, "alice")
    assert alice[-3:-1] == ["6.00", "6.00"]
    queues = client.get("/ui/accounting", params={"days": 7, "by": "queue"}).text
    # research's nominal 8 GPUs over the window's hours; 16 GPU-h used of it
    research = _cells(queues, "research")
    assert research[-4] == "16.00"
    exported = client.get("/ui/accounting.csv", params={"days": 7, "by": "user"})
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert sum(float(r["gpu_hours"]) for r in rows if r["user"] == "bob") == 16.0


def test_a_user_sees_only_their_own_usage(client: TestClient, tokens: dict[str, str]) -> None:
    login(client, tokens["alice"])
    page = client.get("/ui/accounting", params={"by": "user"}).text
    assert "<td>alice</td>" in page
    assert "bob" not in page.split("<main>")[1]
    rows = list(csv.DictReader(io.StringIO(client.get("/ui/accounting.csv").text)))
    assert {r["user"] for r in rows} == {"alice"}
