"""The fabric page (both stores): the hierarchy in its own order (su2 before su10), a
heat-map from 64 nodes, the nodes needing attention (and those with no machine on one line,
never offered a resume), a filter by name and state; and resume refused for a node with no
machine behind it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.control.conftest import FLAVOR
from tests.control.test_dashboard import app_for, login

from railyard.control.store.database import Store
from railyard.control.store.tables import NodeRow
from railyard.control.usecases.joined import NOT_JOINED

pytestmark = pytest.mark.stores


def _nodes(store: Store, count: int) -> None:
    """``count`` nodes over scalable units su1..su10 (ten per unit, names by unit); x5 is
    down with a reason, x6 fails its health check, su10's nodes have no machine."""
    now = time.time()
    with store.session() as session:
        for i in range(count):
            su = 1 + i // 10
            name = f"x{i}"
            state, reason, health = "ready", "", None
            if name == "x5":
                state, reason = "down", "disk full"
            if name == "x6":
                health = "fail"
            if su == 10:
                state, reason = "down", NOT_JOINED
            path = [f"su{su}", f"su{su}-lg1"]
            session.add(NodeRow(name=name, flavor=FLAVOR, gpus=8, path=path, state=state,
                                reason=reason, health=health, updated_t_s=now))  # fmt: skip


@pytest.fixture
def client(store: Store, tmp_path: Path, tokens: dict[str, str]) -> TestClient:
    _nodes(store, 100)
    return login(app_for(store, tmp_path), tokens["root"])


def test_a_large_fabric_is_a_heat_map_in_hierarchy_order(client: TestClient) -> None:
    page = client.get("/ui/fabric").text
    units = re.findall(r'<div class="su map"><b>([^<]+)</b>', page)
    assert units[:3] == ["su1", "su2", "su3"]
    assert units[-1] == "su10"  # not between su1 and su2
    assert units.index("su9") < units.index("su10")
    assert page.count('class="cell ') == 102  # these 100 and the seeded cluster's n01, n02
    assert 'id="node-x5"' in page
    assert re.search(r'class="cell u0 down"[^>]*id="node-x5"', page)
    assert re.search(r'class="cell u0 ready hfail"[^>]*id="node-x6"', page)
    assert re.search(r'class="cell u0 absent"[^>]*id="node-x95"', page)


def test_nodes_needing_attention_and_those_without_a_machine(client: TestClient) -> None:
    page = client.get("/ui/fabric").text
    table = page.split('id="bad-nodes">', 1)[1].split("</tbody>", 1)[0]
    assert re.findall(r">(x\d+)</a>", table) == ["x5", "x6"]
    assert "disk full" in table
    assert "10 node(s) have no live machine: x90, x91" in page


def test_the_boxes_view_filters_and_never_offers_a_resume_without_a_machine(
    client: TestClient,
) -> None:
    boxes = client.get("/ui/fabric", params={"view": "boxes", "q": "x9"}).text
    assert re.findall(r'id="node-(x\d+)"', boxes) == ["x9", *(f"x{i}" for i in range(90, 100))]
    assert boxes.count("/resume") == 0  # x90.. have no machine; x9 is ready
    assert boxes.count("/drain") == 1
    down = client.get("/ui/fabric", params={"view": "boxes", "state": "down", "q": "x5"}).text
    assert re.findall(r'id="node-(x\d+)"', down) == ["x5"]
    assert "disk full" in down.split('id="node-x5"', 1)[1]
    assert down.count("/ui/nodes/x5/resume") == 1


def test_resume_is_refused_without_a_machine(client: TestClient, tokens: dict[str, str],
                                             store: Store, tmp_path: Path) -> None:  # fmt: skip
    api = TestClient(client.app, headers={"Authorization": f"Bearer {tokens['root']}"})
    refused = api.post("/v1/nodes/x95/resume")
    assert refused.status_code == 409
    assert "no live machine" in refused.json()["detail"]
    assert api.post("/v1/nodes/x5/resume").status_code == 200
