"""The REST API in-process (FastAPI TestClient), on SQLite and PostgreSQL."""

from __future__ import annotations

import pwd
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from railyard.control.api.app import create_app, read_log
from railyard.control.store.convert import usage_keys
from railyard.control.store.database import Store
from railyard.control.store.paths import log_path
from railyard.control.store.tables import Counter, EventRow, JobRow, NodeRow, UsageRow, User
from railyard.control.usecases.accounts import RunAs
from railyard.control.usecases.jobs import JOB_COUNTER
from railyard.sched import Usage


class Api:
    """A TestClient per user, plus the wake-up count the service loop would see."""

    def __init__(self, store: Store, state_dir: Path, tokens: dict[str, str]) -> None:
        self.store, self.state_dir, self.wakes = store, state_dir, 0
        app = create_app(store, wake=self._wake, state_dir=state_dir)
        self.anon = TestClient(app)
        self.as_ = {
            name: TestClient(app, headers={"Authorization": f"Bearer {token}"})
            for name, token in tokens.items()
        }

    def _wake(self) -> None:
        self.wakes += 1

    def submit(self, user: str, **body: Any) -> list[dict[str, Any]]:
        body.setdefault("command", ["python", "train.py"])
        response = self.as_[user].post("/v1/jobs", json=body)
        assert response.status_code == 201, response.text
        jobs: list[dict[str, Any]] = response.json()
        return jobs

    def jobs_and_counter(self) -> tuple[int, int | None]:
        with self.store.session() as session:
            jobs = session.scalar(select(func.count()).select_from(JobRow)) or 0
            counter = session.get(Counter, JOB_COUNTER)
            return jobs, counter.value if counter else None


@pytest.fixture
def api(store: Store, tokens: dict[str, str], tmp_path: Path) -> Api:
    return Api(store, tmp_path / "state", tokens)


def test_submit_list_show_cancel(api: Api) -> None:
    raised = api.as_["root"].patch("/v1/queues/default", json={"max_priority": "high"})
    assert raised.status_code == 200  # a plain member asks at most the queue's bound
    api.wakes = 0
    [job] = api.submit("alice", name="llm", gpus=4, time="1:00:00", priority="high")
    assert api.wakes == 1
    assert job["id"] == "1"
    assert (job["state"], job["user"], job["queue"]) == ("pending", "alice", "default")
    assert (job["gpus"], job["workers"], job["gpus_per_worker"]) == (4, 4, 1)
    assert (job["walltime_s"], job["priority"], job["flavor"]) == (3600, 1000, "H100-SXM-80GB")
    listed = api.as_["alice"].get("/v1/jobs").json()
    assert [j["id"] for j in listed] == ["1"]
    shown = api.as_["alice"].get("/v1/jobs/1").json()
    assert shown["name"] == "llm"
    assert shown["command"] == ["python", "train.py"]
    [cancelled] = api.as_["alice"].delete("/v1/jobs/1").json()
    assert cancelled["state"] == "cancelled"
    assert cancelled["reason"] == "cancelled by alice"
    assert cancelled["end_t_s"] is not None
    assert api.wakes == 2
    pending = api.as_["alice"].get("/v1/jobs", params={"state": "pending"}).json()
    assert pending == []
    with api.store.session() as session:
        kinds = session.scalars(select(EventRow.kind).where(EventRow.job_id == "1")).all()
    assert kinds == ["submitted", "cancel"]
    events = api.as_["alice"].get("/v1/jobs/1/events").json()
    assert [(e["kind"], e["message"]) for e in events][-1] == ("cancel", "alice: -> cancelled")
    assert [e["kind"] for e in events] == ["submitted", "cancel"]
    assert api.as_["root"].get("/v1/jobs/1/events").status_code == 200  # an admin sees all
    assert api.as_["bob"].get("/v1/jobs/1/events").json()["detail"] == "no job '1'"


def test_job_numbers_count_up_across_users(api: Api) -> None:
    ids = [api.submit(u)[0]["id"] for u in ("alice", "bob", "alice")]
    assert ids == ["1", "2", "3"]
    assert api.jobs_and_counter() == (3, 3)


def test_array_expands_to_tasks(api: Api) -> None:
    [array] = api.submit("alice", array="0-9%2", gpus=1)  # one record, as sbatch's one id
    assert (array["id"], array["array"], array["array_index"]) == ("1", "0-9%2", None)
    jobs = api.as_["alice"].get("/v1/jobs", params={"array": "1"}).json()
    assert [j["id"] for j in jobs] == [f"1_{i}" for i in range(10)]
    assert {(j["array_parent"], j["array"]) for j in jobs} == {("1", "0-9%2")}
    assert [j["array_index"] for j in jobs] == list(range(10))
    with api.store.session() as session:
        limits = set(session.scalars(select(JobRow.array_max_running)))
    assert limits == {2}
    # Each task its own number (SLURM_JOB_ID), as Slurm: the array's goes to the last task.
    assert [j["task_number"] for j in jobs] == [*range(2, 11), 1]
    assert api.submit("alice")[0]["id"] == "11"
    cancelled = api.as_["alice"].delete("/v1/jobs/1").json()  # the parent cancels every task
    assert [(j["id"], j["state"]) for j in cancelled] == [("1", "cancelled")]
    tasks = api.as_["alice"].get("/v1/jobs", params={"array": "1"}).json()
    assert {j["state"] for j in tasks} == {"cancelled"}


def test_an_array_s_own_id_names_its_tasks_where_one_task_is_needed(api: Api) -> None:
    """`railyard logs 1` on an array said only "no job '1'"; now it says which ids to use,
    to the array's owner alone (another user still learns nothing)."""
    [array] = api.submit("alice", array="0-3")
    logs = api.as_["alice"].get(f"/v1/jobs/{array['id']}/logs")
    assert logs.status_code == 404
    assert logs.json()["detail"] == (
        f"no job '{array['id']}' (hint: {array['id']} is an array of 4 tasks, "
        f"{array['id']}_0 to {array['id']}_3: name one)"
    )
    assert api.as_["bob"].get(f"/v1/jobs/{array['id']}/logs").json()["detail"] == (
        f"no job '{array['id']}'"
    )


def test_an_array_task_is_cancelled_held_and_released_by_its_own_number(api: Api) -> None:
    """`scancel $SLURM_JOB_ID` from inside a task: its own number names it (it answered "no
    job" where `show` found it), alone or among other ids; another user still gets 404."""
    [array] = api.submit("alice", array="0-2")
    alice, bob = api.as_["alice"], api.as_["bob"]
    tasks = alice.get("/v1/jobs", params={"array": array["id"]}).json()
    own = {j["id"]: str(j["task_number"]) for j in tasks}
    assert own == {"1_0": "2", "1_1": "3", "1_2": "1"}  # the last task has the array's number
    assert bob.delete(f"/v1/jobs/{own['1_0']}").status_code == 404
    assert bob.post(f"/v1/jobs/{own['1_0']}/hold").status_code == 404
    [held] = alice.post(f"/v1/jobs/{own['1_0']}/hold").json()
    assert (held["id"], held["hold"]) == ("1_0", "user")
    [released] = alice.post(f"/v1/jobs/{own['1_0']}/release").json()
    assert (released["id"], released["hold"]) == ("1_0", None)
    [cancelled] = alice.delete(f"/v1/jobs/{own['1_0']}").json()
    assert (cancelled["id"], cancelled["state"]) == ("1_0", "cancelled")
    answer = alice.post("/v1/jobs/cancel", json={"ids": [own["1_1"], "99"]}).json()
    assert [(j["id"], j["state"]) for j in answer["jobs"]] == [("1_1", "cancelled")]
    assert [r["id"] for r in answer["refused"]] == ["99"]
    states = {j["id"]: j["state"] for j in alice.get("/v1/jobs", params={"array": "1"}).json()}
    assert states == {"1_0": "cancelled", "1_1": "cancelled", "1_2": "pending"}


def test_users_cannot_see_or_cancel_each_others_jobs(api: Api) -> None:
    [job] = api.submit("alice")
    bob = api.as_["bob"]
    assert bob.get("/v1/jobs").json() == []
    assert bob.get(f"/v1/jobs/{job['id']}").status_code == 404  # 404, not 403: ids don't leak
    response = bob.delete(f"/v1/jobs/{job['id']}")
    assert response.status_code == 404
    assert response.json()["detail"] == "no job '1'"
    assert bob.get(f"/v1/jobs/{job['id']}/logs").status_code == 404
    assert bob.get("/v1/jobs", params={"user": "alice"}).json() == []
    root = api.as_["root"]
    assert [j["user"] for j in root.get("/v1/jobs").json()] == ["alice"]
    assert root.get("/v1/jobs", params={"user": "bob"}).json() == []
    [cancelled] = root.delete(f"/v1/jobs/{job['id']}").json()
    assert cancelled["reason"] == "cancelled by root"


def test_cancel_running_job_leaves_it_to_the_loop(api: Api) -> None:
    [job] = api.submit("alice", gpus=2)
    with api.store.session() as session:
        row = session.get(JobRow, job["id"])
        assert row is not None
        row.state, row.start_t_s, row.placement = "running", row.submit_t_s, {"n01": [0, 1]}
    nodes = api.as_["alice"].get("/v1/nodes").json()
    assert [(n["name"], n["gpus_used"]) for n in nodes] == [("n01", 2), ("n02", 0)]
    [cancelling] = api.as_["alice"].delete(f"/v1/jobs/{job['id']}").json()
    assert cancelling["state"] == "cancelling"
    assert cancelling["end_t_s"] is None
    [again] = api.as_["alice"].delete(f"/v1/jobs/{job['id']}").json()  # a repeat is harmless
    assert again["state"] == "cancelling"


def test_many_jobs_are_cancelled_in_one_transaction(api: Api) -> None:
    """``scancel 1 2 3``: one request, one commit (the loop sees every cancel or none); an id
    a single cancel would refuse is listed with its status and line and stops no other."""
    from sqlalchemy import event

    [first] = api.submit("alice")
    [array] = api.submit("alice", array="0-2")
    [bobs] = api.submit("bob")
    commits: list[int] = []
    event.listen(api.store.engine, "commit", lambda _conn: commits.append(1))
    ids = [first["id"], array["id"], bobs["id"], "999", first["id"], "x;y"]
    answer = api.as_["alice"].post("/v1/jobs/cancel", json={"ids": ids})
    assert answer.status_code == 200, answer.text
    assert len(commits) == 1
    body = answer.json()
    cancelled = {j["id"]: j["state"] for j in body["jobs"]}
    assert cancelled[first["id"]] == "cancelled"
    assert array["id"] in cancelled
    tasks = api.as_["alice"].get("/v1/jobs", params={"array": array["id"]}).json()
    assert [t["state"] for t in tasks] == ["cancelled"] * 3
    assert [(r["id"], r["status"]) for r in body["refused"]] == [
        (bobs["id"], 404),
        ("999", 404),
        ("x;y", 404),
    ]
    assert body["refused"][0]["detail"] == f"no job '{bobs['id']}'"
    assert api.as_["bob"].get(f"/v1/jobs/{bobs['id']}").json()["state"] == "pending"
    assert api.as_["alice"].post("/v1/jobs/cancel", json={"ids": []}).status_code == 422
    too_many = {"ids": [str(i) for i in range(1001)]}
    assert api.as_["alice"].post("/v1/jobs/cancel", json=too_many).status_code == 422


def test_membership_of_a_parent_queue_allows_its_children(api: Api, seeder: Any) -> None:
    seeder.queue("team", nominal=0)
    seeder.queue("team-a", parent="team")
    carol = seeder.user("carol", queues=("team",))
    api.as_["carol"] = TestClient(api.anon.app, headers={"Authorization": f"Bearer {carol}"})
    assert api.submit("carol", queue="team-a")[0]["queue"] == "team-a"
    response = api.as_["carol"].post("/v1/jobs", json={"command": ["x"], "queue": "default"})
    assert response.status_code == 403
    assert api.submit("root", queue="research")[0]["queue"] == "research"  # admins anywhere


BAD_SUBMISSIONS = [
    ({"gpu": 8}, "gpu: unknown field (hint: did you mean 'gpus'?)"),
    ({"time": "1h"}, "time: bad time '1h' (hint: use MM, MM:SS, HH:MM:SS"),
    (
        {"queue": "nope"},
        "queue: unknown queue 'nope' (hint: known queues: default)",
    ),  # not research
    ({"flavor": "B200"}, "flavor: no node has flavor 'B200' (hint: known flavors"),
    ({"workers": 1, "gpus_per_worker": 16}, "gpus_per_worker: 16 GPUs per worker, but the"),
    ({"gpus": 17}, "gpus: 17 GPUs asked, the cluster has 16"),
    (
        {"workers": 3, "gpus_per_worker": 5},
        "gpus: 3 x 5 GPUs never fit: the 2 H100-SXM-80GB nodes hold at most 2 such workers",
    ),
    (
        {"workers": 2, "gpus_per_worker": 8, "topology": "node"},
        "gpus: 2 x 8 GPUs within one node never fit: a node of H100-SXM-80GB nodes holds at "
        "most 1 such workers (hint: fewer workers",
    ),
    ({"script": "echo hi"}, "give exactly one of command or script"),
    ({"gpus": 2, "workers": 2}, "give workers/gpus_per_worker, or gpus, or nodes"),
    ({"array": "5-1"}, "array: bad array range '5-1'"),
    ({"priority": "urgent"}, "priority: unknown priority 'urgent' (hint: an integer or low|"),
    ({"topology": "rack"}, "topology: unknown topology level 'rack'"),
    ({"signal": "USR9@60"}, "signal: unknown signal 'USR9'"),
    ({"gpus": 1, "gpu_type": "a100"}, "gpu_type: no node has GPU type 'a100' (hint: known: H100-"),
    ({"nodes": 3, "gpus_per_node": 8}, "nodes: 3 nodes asked, the cluster has 2 H100-SXM-80GB"),
    (
        {"gpus": 12, "exclusive": True},
        "exclusive: --exclusive with 12 GPUs spread over H100-SXM-80GB nodes of 8 (hint: say",
    ),
    ({"mem": "lots"}, "mem: bad memory size 'lots' (hint: e.g. 16G"),
    ({"dependency": "afterwards:1"}, "dependency: unknown dependency type 'afterwards'"),
    ({"dependency": "afterok:1:99?afterany:7_2"}, "dependency: no job 99, 7_2 (hint: name jobs"),
    ({"nodes": 2, "gpus_per_node": 1, "ntasks": 3}, "ntasks=3 is not a multiple of nodes=2"),
    ({"env": {"A=B": "1"}}, "env: 'A=B' has '=' in it (hint: NAME and VALUE are separate)"),
    ({"env": {f"V{i}": "" for i in range(5000)}}, "env: 5000 variables, at most 1024 (hint:"),
    ({"env": {"BIG": "x" * 200_000}}, "env: BIG is 200005 bytes, at most 131072"),
    ({"export": ""}, "export: String should have at least 1 character"),
]


def test_a_field_of_another_request_is_unknown_without_a_hint_to_itself(api: Api) -> None:
    """``unix_user`` is a field of the users route, not of a submit: no "did you mean
    'unix_user'?" for it (the answer to a user who tried to run as root)."""
    response = api.as_["alice"].post("/v1/jobs", json={"command": ["id"], "unix_user": "root"})
    assert response.status_code == 422
    assert response.json()["detail"] == "unix_user: unknown field"


@pytest.mark.parametrize(("body", "detail"), BAD_SUBMISSIONS)
def test_malformed_submission_is_422_and_stores_nothing(
    api: Api, body: dict[str, Any], detail: str
) -> None:
    api.submit("alice")
    before = api.jobs_and_counter()
    response = api.as_["alice"].post("/v1/jobs", json={"command": ["python"], **body})
    assert response.status_code == 422, response.text
    line = response.json()["detail"]
    assert line.startswith(detail)
    assert "\n" not in line
    assert api.jobs_and_counter() == before == (1, 1)
    assert api.wakes == 1


def test_invalid_json_and_bad_query_are_one_line_422(api: Api) -> None:
    alice = api.as_["alice"]
    response = alice.post(
        "/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["detail"] == "request body is not valid JSON"
    response = alice.get("/v1/jobs", params={"state": "sleeping"})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("state: unknown state 'sleeping'")


def test_logs_from_an_offset(api: Api) -> None:
    [job] = api.submit("alice", gpus=2)
    alice = api.as_["alice"]
    empty = alice.get(f"/v1/jobs/{job['id']}/logs").json()
    assert (empty["text"], empty["offset"], empty["finished"]) == ("", 0, False)
    path = log_path(api.state_dir / "jobs", job["id"], 1)
    path.parent.mkdir(parents=True)
    path.write_bytes("step 1\nloss ✓".encode())
    first = alice.get(f"/v1/jobs/{job['id']}/logs", params={"rank": 1}).json()
    assert first["text"] == "step 1\nloss ✓"
    with path.open("ab") as f:
        f.write(b"\nstep 2\n")
    params = {"rank": 1, "offset": first["offset"]}
    second = alice.get(f"/v1/jobs/{job['id']}/logs", params=params).json()
    assert second["text"] == "\nstep 2\n"
    response = alice.get(f"/v1/jobs/{job['id']}/logs", params={"rank": 2})
    assert response.status_code == 422
    assert response.json()["detail"] == "rank: job 1 has logs 0..1"


def test_read_log_holds_back_a_cut_character(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.log"
    path.write_bytes("a✓".encode()[:-1])  # the writer is mid-character
    assert read_log(path, 0) == ("a", 1)
    path.write_bytes("a✓b".encode())
    assert read_log(path, 1) == ("✓b", 5)
    assert read_log(path, 0, limit=3) == ("a", 1)  # a chunk boundary inside a character


def test_nodes_drain_and_resume(api: Api) -> None:
    response = api.as_["alice"].post("/v1/nodes/n01/drain", json={"reason": "x"})
    assert response.status_code == 403
    root = api.as_["root"]
    drained = root.post("/v1/nodes/n01/drain", json={"reason": "bad DIMM"}).json()
    assert (drained["state"], drained["reason"]) == ("draining", "bad DIMM")
    assert root.post("/v1/nodes/n09/drain", json={}).status_code == 404
    resumed = root.post("/v1/nodes/n01/resume").json()
    assert (resumed["state"], resumed["reason"]) == ("ready", "")
    assert api.wakes == 2


def test_queues_show_usage_and_borrowing(api: Api) -> None:
    root = api.as_["root"]
    made = root.post(
        "/v1/queues", json={"name": "vision", "parent": "research", "nominal_gpus": {}}
    )
    assert made.status_code == 201, made.text
    assert root.post("/v1/queues", json={"name": "vision"}).status_code == 409
    bad_parent = root.post("/v1/queues", json={"name": "x", "parent": "nope"})
    assert bad_parent.status_code == 422
    cycle = root.patch("/v1/queues/research", json={"parent": "vision"})
    assert cycle.status_code == 422
    assert "cycle" in cycle.json()["detail"]
    updated = root.patch("/v1/queues/vision", json={"weight": 2.0}).json()
    assert (updated["weight"], updated["parent"]) == (2.0, "research")
    assert root.post("/v1/queues/vision/members", json={"user": "bob"}).status_code == 200
    [job] = api.submit("bob", queue="vision", gpus=3)
    with api.store.session() as session:
        row = session.get(JobRow, job["id"])
        assert row is not None
        row.state, row.placement = "running", {"n02": [0, 1, 2]}
        # the key the loop stores a nested queue's usage under (it was read by path: 0.0)
        [key] = usage_keys(Usage(queue_gpu_s={"vision": 7200.0}))
        session.add(UsageRow(key=key, gpu_s=7200.0, updated_t_s=0.0))
    queues = {q["name"]: q for q in api.as_["bob"].get("/v1/queues").json()}
    assert sorted(queues) == ["default", "vision"]  # bob's queues and those below them
    vision = queues["vision"]
    assert vision["used_gpus"] == {"H100-SXM-80GB": 3}
    assert vision["borrowed_gpus"] == {"H100-SXM-80GB": 3}
    assert (vision["usage_gpu_s"], vision["running_jobs"], vision["members"]) == (
        7200.0,
        1,
        ["bob"],
    )
    research = next(q for q in root.get("/v1/queues").json() if q["name"] == "research")
    assert research["used_gpus"] == {"H100-SXM-80GB": 3}
    assert research["borrowed_gpus"] == {}  # within research's 8 nominal
    removed = root.delete("/v1/queues/vision/members/bob").json()
    assert removed["members"] == []


def test_healthz_and_openapi(api: Api) -> None:
    assert api.anon.get("/healthz").json()["status"] == "ok"
    spec = api.anon.get("/openapi.json").json()
    assert "/v1/jobs/{job_id}/logs" in spec["paths"]
    assert "bearer" in str(spec["components"]["securitySchemes"]).lower()
    assert api.anon.get("/docs").status_code == 200


def test_concurrent_submissions_get_distinct_numbers(store: Store, tokens: dict[str, str]) -> None:
    app = create_app(store, wake=lambda: None, state_dir=Path("/nonexistent"))
    headers = {"Authorization": f"Bearer {tokens['alice']}"}

    def submit(_: int) -> str:
        with TestClient(app, headers=headers) as client:
            response = client.post("/v1/jobs", json={"command": ["x"]})
            assert response.status_code == 201, response.text
            job_id: str = response.json()[0]["id"]
            return job_id

    with ThreadPoolExecutor(6) as pool:
        ids = list(pool.map(submit, range(18)))
    assert sorted(int(i) for i in ids) == list(range(1, 19))


def test_queue_time_limits_and_bounds_round_trip_and_bind_submits(api: Api) -> None:
    root = api.as_["root"]
    body = {"priority_preemption": True, "default_time_s": 3600, "max_time_s": 7200}
    response = root.patch("/v1/queues/default", json={**body, "max_min_runtime_s": 60})
    assert response.status_code == 200, response.text
    out = response.json()
    assert (out["priority_preemption"], out["default_time_s"], out["max_time_s"]) == (
        True,
        3600,
        7200,
    )
    before = api.jobs_and_counter()
    response = api.as_["alice"].post("/v1/jobs", json={"command": ["x"], "min_runtime_s": 600})
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "min_runtime_s: 600 s is above queue default's bound of 60 s (hint: ask for at most 60)"
    )
    assert api.jobs_and_counter() == before
    cleared = root.patch("/v1/queues/default", json={"max_time_s": None}).json()
    assert (cleared["max_time_s"], cleared["default_time_s"]) == (None, 3600)
    idle = root.patch("/v1/queues/default", json={"idle_limit_s": 1800}).json()
    assert idle["idle_limit_s"] == 1800
    bad = root.patch("/v1/queues/default", json={"idle_limit_s": -5})
    assert bad.status_code == 422, bad.text
    assert "idle_limit_s" in bad.json()["detail"]
    assert api.as_["alice"].patch("/v1/queues/default", json={"idle_limit_s": 1}).status_code == 403
    listed = {q["name"]: q for q in root.get("/v1/queues").json()}
    assert listed["default"]["idle_limit_s"] == 1800
    assert (
        root.patch("/v1/queues/default", json={"idle_limit_s": None}).json()["idle_limit_s"] is None
    )


def test_gpu_type_picks_the_flavor(api: Api) -> None:
    [job] = api.submit("alice", gpus_per_node=2, gpu_type="h100")
    assert (job["flavor"], job["workers"], job["gpus_per_worker"]) == ("H100-SXM-80GB", 1, 2)
    assert api.submit("alice", gpus=1, gpu_type="H100-SXM-80GB")[0]["flavor"] == "H100-SXM-80GB"


def test_slurm_fields_are_stored_and_shown(api: Api) -> None:
    first, second = (api.submit("alice")[0]["id"] for _ in range(2))
    [job] = api.submit(
        "alice",
        script="#!/bin/bash\nsrun hostname\n",
        command=None,
        nodes=2,
        gpus_per_node=8,
        ntasks_per_node=1,
        cpus_per_task=16,
        mem="64G",
        export="ALL",
        env={"PATH": "/opt/bin:/usr/bin", "LANG": "C.UTF-8"},
        workdir=str(api.state_dir.parent),  # must exist on the node at submit
        submit_dir="/home/alice",
        dependency=f"afterok:{first}?afternotok:{second}",
        requeue=True,
        exclusive=True,
    )
    assert (job["workers"], job["gpus_per_worker"], job["distinct_nodes"]) == (2, 8, True)
    assert (job["ntasks_per_node"], job["cpus_per_task"], job["mem_per_node_mb"]) == (1, 16, 65536)
    assert (job["export"], job["env_vars"], job["submit_dir"]) == ("ALL", 2, "/home/alice")
    assert job["output"] == "slurm-%j.out"  # sbatch's default for a batch script
    assert (job["dependency"], job["requeue"], job["unix_user"]) == (
        f"afterok:{first}?afternotok:{second}",
        True,
        "alice",
    )
    with api.store.session() as session:
        row = session.get(JobRow, job["id"])
        assert row is not None
        assert (row.cpus_per_worker, row.mem_per_worker_gb) == (16, 64.0)
        assert row.requeue_on_failure is False  # --requeue is Slurm's: node failure, preemption
        assert row.env == {"PATH": "/opt/bin:/usr/bin", "LANG": "C.UTF-8"}
    [array] = api.submit("alice", script="#!/bin/sh\n", command=None, array="0-1")
    assert array["output"] == "slurm-%A_%a.out"
    assert api.submit("alice", gpus=1)[0]["output"] is None  # a command job: the spool log


def test_unix_users_default_to_the_name_and_can_be_changed(api: Api) -> None:
    root = api.as_["root"]
    made = root.post("/v1/users", json={"name": "erin"}).json()
    assert made["unix_user"] == "erin"
    made = root.post("/v1/users", json={"name": "frank", "unix_user": "fk"}).json()
    assert made["unix_user"] == "fk"
    changed = root.patch("/v1/users/erin", json={"unix_user": "erin2"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["unix_user"] == "erin2"
    bad = root.post("/v1/users", json={"name": "gil", "unix_user": "Not A User"})
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("unix_user: 'Not A User' is not allowed here (hint: ")
    assert api.as_["alice"].patch("/v1/users/erin", json={"is_admin": True}).status_code == 403
    names = {u["name"]: u["unix_user"] for u in root.get("/v1/users").json()}
    assert names["erin"] == "erin2"


def test_single_user_mode_refuses_other_accounts_at_submit(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    app = create_app(
        store, wake=lambda: None, state_dir=tmp_path, run_as=RunAs("svc", multi_user=False)
    )
    alice = TestClient(app, headers={"Authorization": f"Bearer {tokens['alice']}"})
    response = alice.post("/v1/jobs", json={"command": ["true"]})
    assert response.status_code == 403
    assert response.json()["detail"] == (
        "single-user mode: this server runs as 'svc' and runs only jobs of users mapped to that "
        "account; user 'alice' maps to 'alice' (hint: start `railyard up` as root to run jobs "
        "as their users' accounts)"
    )
    multi = create_app(
        store, wake=lambda: None, state_dir=tmp_path, run_as=RunAs("root", multi_user=True)
    )
    missing = _missing_unix_account()
    root = TestClient(multi, headers={"Authorization": f"Bearer {tokens['root']}"})
    refused = root.patch("/v1/users/bob", json={"unix_user": missing})  # said to the admin
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith(
        f"unix_user: user 'bob' maps to Unix account '{missing}', which does not exist"
    )
    with store.session() as s:  # an account removed after the mapping: refused at submit too
        s.scalars(select(User).where(User.name == "bob")).one().unix_user = missing
        s.commit()
    bob = TestClient(multi, headers={"Authorization": f"Bearer {tokens['bob']}"})
    response = bob.post("/v1/jobs", json={"command": ["true"]})
    assert response.status_code == 422
    assert response.json()["detail"].startswith(
        f"unix_user: user 'bob' maps to Unix account '{missing}', which does not exist on this "
        "machine"
    )


def _missing_unix_account() -> str:
    """A Unix account name no machine has, whatever walk-through users exist here."""
    for suffix in range(1000):
        name = f"ry-absent{suffix}"
        try:
            pwd.getpwnam(name)
        except KeyError:
            return name
    raise AssertionError("every ry-absentN account exists")


@pytest.mark.parametrize(
    ("fields", "per_node_mb", "per_worker_gb"),
    [
        # 2 nodes x 4 tasks x 2 CPUs, 4G a CPU: 32G a node
        (
            {
                "nodes": 2,
                "gpus_per_node": 4,
                "ntasks_per_node": 4,
                "cpus_per_task": 2,
                "mem_per_cpu": "4G",
            },
            32768,
            32.0,
        ),
        # a task has one CPU unless told: 4 tasks, 1000M a CPU
        (
            {"nodes": 1, "gpus_per_node": 4, "ntasks_per_node": 4, "mem_per_cpu": "1000M"},
            4000,
            4000 / 1024,
        ),
        # 4 GPUs a node, 80G a GPU
        ({"nodes": 2, "gpus_per_node": 4, "mem_per_gpu": "80G"}, 327680, 320.0),
        # spread one-GPU chunks: each books its GPU's share, the node limit is the whole
        ({"gpus": 4, "mem_per_gpu": "10G"}, 40960, 10.0),
    ],
)
def test_memory_per_cpu_and_per_gpu_book_as_sbatch_counts_them(
    api: Api, fields: dict[str, object], per_node_mb: int, per_worker_gb: float
) -> None:
    [job] = (
        api.submit("alice", gpus=None, **fields)
        if "gpus" not in fields
        else api.submit("alice", **fields)
    )
    assert job["mem_per_node_mb"] == per_node_mb
    with api.store.session() as session:
        row = session.get(JobRow, job["id"])
        assert row is not None
        assert row.mem_per_worker_gb == pytest.approx(per_worker_gb)


def test_memory_spellings_exclude_each_other(api: Api) -> None:
    response = api.as_["alice"].post(
        "/v1/jobs", json={"command": ["true"], "mem": "4G", "mem_per_gpu": "8G"}
    )
    assert response.status_code == 422
    assert "give one of mem, mem_per_gpu (as sbatch: they exclude each other)" in response.text


@pytest.mark.parametrize(
    ("fields", "tasks"),
    [
        ({"gpus_per_node": 4, "nodes": 2}, 4),  # a task per GPU asked; each node whole
        ({"gpus": 0, "nodes": 1}, 1),  # a CPU job gets the node's GPUs too, as Slurm's
        ({"gpus": 2}, 2),
    ],
)
def test_exclusive_books_whole_nodes_as_slurm_does(
    api: Api, fields: dict[str, object], tasks: int
) -> None:
    """Slurm 22.05's ``--exclusive`` gives every GPU and core of each node it gets
    (benchmarks/slurm/compare_scripts.py: 8 of 8 GPUs, 16 of 16 CPUs for ``--exclusive
    --nodes=1``); the job keeps as many tasks as it asked for."""
    with api.store.session() as session:
        for node in session.scalars(select(NodeRow)):
            node.cpu_cores, node.mem_gb = 16, 64.0
    [job] = api.submit("alice", exclusive=True, **fields)
    assert (job["gpus_per_worker"], job["distinct_nodes"], job["ntasks_per_node"]) == (
        8,
        True,
        tasks,
    )
    with api.store.session() as session:
        row = session.get(JobRow, job["id"])
        assert row is not None
        assert (row.cpus_per_worker, row.mem_per_worker_gb) == (16, 64.0)
