"""Node pools at submit (issue 23): a queue limited to a pool admits jobs on that pool's
flavors only, a queue without one never lands on a pooled node, and the GPU type names the
model whatever the pool (`blueprint.pools`)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.control.test_api import Api

from railyard.control.store.database import Store
from railyard.control.store.tables import NodeRow

POOLED = "RTX-6000-Ada-48GB@interactive"


def _pool_nodes(store: Store) -> None:
    with store.session() as session:
        for i in (1, 2):
            session.add(
                NodeRow(
                    name=f"eval{i}", flavor=POOLED, gpus=4, path=["eval-su", "eval-lg0"],
                    state="ready", reason="", updated_t_s=time.time(),
                )
            )  # fmt: skip


def test_a_pooled_queue_runs_on_its_pool_and_others_never_do(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    _pool_nodes(store)
    api = Api(store, tmp_path / "state", tokens)
    root = api.as_["root"]
    made = root.post(
        "/v1/queues",
        json={"name": "interactive", "pool": "interactive", "nominal_gpus": {POOLED: 8},
              "max_time_s": 8 * 3600, "idle_limit_s": 1800},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    assert (made.json()["pool"], made.json()["idle_limit_s"]) == ("interactive", 1800)
    assert root.post("/v1/queues/interactive/members", json={"user": "alice"}).status_code < 300
    # The pool's flavor by default, and by GPU type.
    [job] = api.submit("alice", queue="interactive", gpus=1)
    assert job["flavor"] == POOLED
    [typed] = api.submit("alice", queue="interactive", gpus=2, gpu_type="rtx")
    assert typed["flavor"] == POOLED
    # A training queue (no pool) never gets a pooled node, even by naming its flavor.
    assert api.submit("alice", gpus=8)[0]["flavor"] == "H100-SXM-80GB"
    refused = api.as_["alice"].post(
        "/v1/jobs", json={"command": ["x"], "flavor": POOLED, "gpus": 1}
    )
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith(
        f"flavor: flavor {POOLED!r} is not for queue 'default', which runs on no pool"
    )
    by_type = api.as_["alice"].post(
        "/v1/jobs", json={"command": ["x"], "gpu_type": "rtx", "gpus": 1}
    )
    assert by_type.status_code == 422
    assert "no node has GPU type 'rtx'" in by_type.json()["detail"]
    # And the pooled queue cannot reach the H100s.
    wrong = api.as_["alice"].post(
        "/v1/jobs",
        json={"command": ["x"], "queue": "interactive", "flavor": "H100-SXM-80GB", "gpus": 1},
    )
    assert wrong.status_code == 422
    assert "which runs on pool 'interactive'" in wrong.json()["detail"]
    bad = root.patch("/v1/queues/interactive", json={"pool": "Not A Pool"})
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("pool:")
