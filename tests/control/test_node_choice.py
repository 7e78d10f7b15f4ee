"""--nodelist/-w and --exclude/-x through the API and the script directives: stored expanded,
shown back, and a name that is no node of the cluster refused in one line, as sbatch does."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from railyard.client.scripts import parse_script
from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import NodeRow


@pytest.fixture
def alice(store: Store, tokens: dict[str, str], tmp_path: Path) -> TestClient:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    return TestClient(app, headers={"Authorization": f"Bearer {tokens['alice']}"})


def test_names_are_expanded_and_stored(alice: TestClient) -> None:
    response = alice.post(
        "/v1/jobs", json={"command": ["true"], "gpus": 1, "nodelist": "n[01-02]", "exclude": "n02"}
    )
    assert response.status_code == 201, response.text
    [job] = response.json()
    assert (job["only_nodes"], job["never_nodes"]) == (["n01", "n02"], ["n02"])
    assert alice.get(f"/v1/jobs/{job['id']}").json()["only_nodes"] == ["n01", "n02"]


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"nodelist": "n09"}, "nodelist: no node 'n09' (hint: nodes: n01, n02)"),
        ({"exclude": "n[01-03]"}, "exclude: no node 'n03' (hint: nodes: n01, n02)"),
        ({"nodelist": "n[01-"}, "nodelist: unclosed '[' in hostlist 'n[01-'"),
        (
            {"nodelist": "n01", "gpus": None, "nodes": 2, "gpus_per_node": 8},
            "gpus: 2 x 8 GPUs on distinct nodes never fit on the nodes it names (--nodelist, "
            "--exclude): they hold at most 1 such workers",
        ),
    ],
)
def test_a_bad_choice_is_one_line(
    alice: TestClient, fields: dict[str, object], detail: str
) -> None:
    response = alice.post("/v1/jobs", json={"command": ["true"], "gpus": 1, **fields})
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(detail)


def test_script_directives_and_short_options() -> None:
    script = (
        "#!/bin/bash\n#SBATCH -w gpu[01-02]\n#SBATCH --exclude=gpu03\n#SBATCH -C ib&nvme\n"
        "srun hostname\n"
    )
    parsed = parse_script(script, "job.sh")
    assert (parsed.options["nodelist"], parsed.options["exclude"]) == ("gpu[01-02]", "gpu03")
    assert parsed.options["constraint"] == "ib&nvme"


@pytest.mark.parametrize(
    ("constraint", "only"),
    [
        ("ib", ["n01"]),
        ("ib&nvme", ["n01"]),
        ("ib,nvme", ["n01"]),  # sbatch's older AND
        ("nvme|eth", ["n01", "n02"]),
        ("h100", ["n01", "n02"]),  # a GPU type is a feature of its nodes
        ("H100-SXM-80GB&eth", ["n02"]),
    ],
)
def test_a_constraint_becomes_the_nodes_that_have_its_features(
    store: Store, alice: TestClient, constraint: str, only: list[str]
) -> None:
    with store.session() as session:
        session.get_one(NodeRow, "n01").features = ["ib", "nvme"]
        session.get_one(NodeRow, "n02").features = ["eth"]
    response = alice.post("/v1/jobs", json={"command": ["x"], "gpus": 1, "constraint": constraint})
    assert response.status_code == 201, response.text
    assert response.json()[0]["only_nodes"] == only


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"constraint": "ib"}, "constraint: no node has features 'ib' (hint: features here: eth,"),
        ({"constraint": "eth", "nodelist": "n01"}, "constraint: no node of --nodelist has those"),
        ({"constraint": "[a|b]"}, "constraint: constraint '[a|b]': only & and | are supported"),
        ({"constraint": "a&&b"}, "constraint: bad feature '' in 'a&&b'"),
    ],
)
def test_a_constraint_no_node_meets_is_refused(
    store: Store, alice: TestClient, fields: dict[str, object], detail: str
) -> None:
    with store.session() as session:
        session.get_one(NodeRow, "n02").features = ["eth"]
    response = alice.post("/v1/jobs", json={"command": ["x"], "gpus": 1, **fields})
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(detail)
