"""A plain user asks at most their queue's ``max_priority`` (admins any); ``nice`` lowers a
job's priority as in Slurm. In-process API on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from railyard.client.scripts import parse_script
from railyard.control.api.app import create_app
from railyard.control.store.database import Store

REFUSED_1M = (
    "priority 1000000 is above what queue 'default' allows its members "
    "(hint: at most 'normal' (500); ask an admin)"
)
REFUSED_CRITICAL = (
    "priority 'critical' (10000) is above what queue 'default' allows its members "
    "(hint: at most 'normal' (500); ask an admin)"
)


@pytest.fixture
def as_(store: Store, tokens: dict[str, str], tmp_path: Path) -> dict[str, TestClient]:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    return {n: TestClient(app, headers={"Authorization": f"Bearer {t}"}) for n, t in tokens.items()}


def _submit(client: TestClient, **body: Any) -> Any:
    return client.post("/v1/jobs", json={"command": ["true"], "gpus": 1, **body})


def test_a_plain_user_asks_at_most_the_bound_an_admin_any(as_: dict[str, TestClient]) -> None:
    for asked, line in ((1_000_000, REFUSED_1M), ("critical", REFUSED_CRITICAL)):
        refused = _submit(as_["bob"], priority=asked)
        assert refused.status_code == 403
        assert refused.json()["detail"] == line
    assert _submit(as_["bob"], priority="high", array="0-3").status_code == 403
    batch = as_["bob"].post("/v1/jobs/batch", json={"jobs": [{"command": ["true"]}] * 2 + [
        {"command": ["true"], "priority": 501}]})  # fmt: skip
    assert batch.status_code == 403
    assert as_["root"].get("/v1/jobs").json() == []  # nothing of the batch was stored
    at_bound = _submit(as_["bob"], priority="normal")
    assert at_bound.status_code == 201
    assert at_bound.json()[0]["priority"] == 500
    assert _submit(as_["bob"], priority=499).json()[0]["priority"] == 499
    for asked, stored in ((1_000_000, 1_000_000), ("critical", 10_000)):  # an admin: any
        made = _submit(as_["root"], priority=asked)
        assert made.status_code == 201, made.text
        assert made.json()[0]["priority"] == stored


def test_an_admin_raises_the_bound_of_a_queue(as_: dict[str, TestClient]) -> None:
    [default] = [q for q in as_["root"].get("/v1/queues").json() if q["name"] == "default"]
    assert default["max_priority"] == 500
    changed = as_["root"].patch("/v1/queues/default", json={"max_priority": "high"})
    assert changed.status_code == 200
    assert changed.json()["max_priority"] == 1000
    assert _submit(as_["bob"], priority="high").status_code == 201
    refused = _submit(as_["bob"], priority=1001)
    assert refused.status_code == 403
    assert "(hint: at most 'high' (1000); ask an admin)" in refused.json()["detail"]
    assert as_["bob"].patch("/v1/queues/default", json={"max_priority": 10}).status_code == 403
    bad = as_["root"].patch("/v1/queues/default", json={"max_priority": "urgent"})
    assert bad.status_code == 422
    assert "unknown priority 'urgent'" in bad.json()["detail"]
    made = as_["root"].post("/v1/queues", json={"name": "low", "max_priority": "low"})
    assert made.json()["max_priority"] == 100


def test_a_job_asking_nothing_gets_at_most_the_bound(as_: dict[str, TestClient]) -> None:
    as_["root"].patch("/v1/queues/default", json={"max_priority": "low"})
    made = _submit(as_["bob"])
    assert made.status_code == 201
    assert made.json()[0]["priority"] == 100
    assert _submit(as_["root"], queue="default").json()[0]["priority"] == 500


def test_nice_lowers_and_only_an_admin_raises(as_: dict[str, TestClient]) -> None:
    job = _submit(as_["bob"], nice=100).json()[0]
    assert (job["priority"], job["nice"]) == (400, 100)
    assert _submit(as_["bob"], priority=50, nice=100).json()[0]["priority"] == 0
    refused = _submit(as_["bob"], nice=-5)
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        "nice -5 raises the job's priority: only an admin may give a negative nice "
        "(hint: give --nice 0 or more, or ask an admin)"
    )
    assert _submit(as_["bob"], priority="high", nice=600).json()[0]["priority"] == 400
    assert _submit(as_["root"], nice=-5).json()[0]["priority"] == 505


def test_sbatch_priority_and_nice_reach_the_same_check(as_: dict[str, TestClient]) -> None:
    text = "#!/bin/bash\n#SBATCH --priority=1000000\n#SBATCH --gpus=1\ntrue\n"
    options = parse_script(text).options
    refused = as_["bob"].post("/v1/jobs", json={**options, "script": text})
    assert refused.status_code == 403
    assert refused.json()["detail"] == REFUSED_1M
    text = "#!/bin/bash\n#SBATCH --qos=high\n#RAILYARD --nice 600\ntrue\n"
    options = parse_script(text).options
    assert options == {"priority": "high", "nice": 600}
    made = as_["bob"].post("/v1/jobs", json={**options, "script": text})
    assert made.json()[0]["priority"] == 400
