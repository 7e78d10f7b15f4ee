"""Batch submission: one request, one transaction, all jobs or none; how many tasks one
request, and one user, may have."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import event
from tests.control.test_api import Api, api  # noqa: F401 - the fixture is used by name

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.usecases.sizebounds import SiteLimits


def test_batch_stores_every_job(api: Api) -> None:  # noqa: F811
    body = {"jobs": [{"command": ["true"], "gpus": 1}, {"command": ["true"], "array": "0-2"}]}
    response = api.as_["alice"].post("/v1/jobs/batch", json=body)
    assert response.status_code == 201, response.text
    assert [(j["id"], j["array"]) for j in response.json()] == [("1", None), ("2", "0-2")]
    tasks = api.as_["alice"].get("/v1/jobs", params={"array": "2"}).json()
    assert [j["id"] for j in tasks] == ["2_0", "2_1", "2_2"]
    assert api.jobs_and_counter() == (4, 4)


def test_batch_is_all_or_nothing(api: Api) -> None:  # noqa: F811
    before = api.jobs_and_counter()
    body = {"jobs": [{"command": ["true"]}, {"command": ["true"], "queue": "nope"}]}
    response = api.as_["alice"].post("/v1/jobs/batch", json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("jobs[1].queue: unknown queue 'nope'")
    assert api.jobs_and_counter() == before


def test_a_batch_is_stored_in_one_statement_per_table(api: Api) -> None:  # noqa: F811
    """1,000 jobs in one request cost three writes (the counter, the jobs, their events), not
    three per job: the store's write lock is held for milliseconds."""
    writes: list[str] = []

    def seen(conn: object, cursor: object, sql: str, *_: object) -> None:
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE")):
            writes.append(sql.split("(")[0].split(" SET")[0].strip())

    api.as_["alice"].post("/v1/jobs", json={"command": ["true"]})  # the counter's row exists
    jobs = [{"command": ["true"], "gpus": 1, "name": f"j{i}"} for i in range(40)]
    body = {"jobs": [*jobs, {"command": ["true"], "array": "0-9"}]}
    event.listen(api.store.engine, "before_cursor_execute", seen)
    try:
        response = api.as_["alice"].post("/v1/jobs/batch", json=body)
    finally:
        event.remove(api.store.engine, "before_cursor_execute", seen)
    assert response.status_code == 201, response.text
    assert sorted(writes) == ["INSERT INTO events", "INSERT INTO jobs", "UPDATE counters"]
    assert [j["name"] for j in response.json()][:3] == ["j0", "j1", "j2"]
    assert api.jobs_and_counter() == (51, 51)


def test_alike_jobs_share_an_admission_but_not_their_ids(api: Api) -> None:  # noqa: F811
    """Equal specs in a row are admitted once (admission.admit_batch): each still gets its own
    id and the same values, and a refused spec after them is named by its own index."""
    alike = {"command": ["true"], "gpus": 2, "name": "same"}
    response = api.as_["alice"].post("/v1/jobs/batch", json={"jobs": [alike] * 3})
    assert response.status_code == 201, response.text
    jobs = response.json()
    assert [j["id"] for j in jobs] == ["1", "2", "3"]
    assert {(j["name"], j["gpus"], j["priority"], j["flavor"]) for j in jobs} == {
        ("same", 2, jobs[0]["priority"], jobs[0]["flavor"])
    }
    refused = {**alike, "gpus": 1000}
    response = api.as_["alice"].post("/v1/jobs/batch", json={"jobs": [alike, alike, refused]})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("jobs[2].gpus")
    assert api.jobs_and_counter() == (3, 3)


def test_a_batch_stores_at_most_an_array_s_tasks(api: Api) -> None:  # noqa: F811
    """30 arrays of 10,000 tasks in one 2 KB body were 300,000 rows in one 27-second write
    (another user's submit waited 30 s): a batch's tasks, counted one by one, are bounded as
    one array's are, before any spec is expanded; up to the bound it is stored."""
    before = api.jobs_and_counter()
    huge = {"jobs": [{"command": ["true"], "gpus": 1, "array": "0-9999"}] * 30}
    response = api.as_["alice"].post("/v1/jobs/batch", json=huge)
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == (
        "jobs: 300000 tasks in one batch, over 10000 (hint: send them in several requests)"
    )
    stepped = {"jobs": [{"command": ["true"], "array": "0-19999:2"}, {"command": ["true"]}]}
    response = api.as_["alice"].post("/v1/jobs/batch", json=stepped)  # 10,000 + 1
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("jobs: 10001 tasks in one batch")
    assert api.jobs_and_counter() == before
    at = {"jobs": [{"command": ["true"], "hold": True, "array": "0-999"}] * 10}
    response = api.as_["alice"].post("/v1/jobs/batch", json=at)
    assert response.status_code == 201, response.text
    assert api.jobs_and_counter()[0] == before[0] + 10_000


def test_a_plain_user_s_jobs_pending_or_running_are_bounded(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    """Slurm's MaxSubmitJobsPerUser (`up --max-jobs-per-user`): array tasks count one by one,
    every way in (one job, an array, a batch); jobs that ended free their place; an admin is
    not bound. One user had queued 530,000 tasks and another's job took 11-49 s to start."""
    limits = SiteLimits(max_jobs_per_user=5)
    app = create_app(store, wake=lambda: None, state_dir=tmp_path / "state", limits=limits)
    alice, root = (TestClient(app, headers={"Authorization": f"Bearer {tokens[name]}"})
                   for name in ("alice", "root"))  # fmt: skip
    job = {"command": ["true"], "hold": True}
    assert alice.post("/v1/jobs", json={**job, "array": "0-2"}).status_code == 201
    over = alice.post("/v1/jobs/batch", json={"jobs": [job, {**job, "array": "0-1"}]})
    assert over.status_code == 403, over.text
    assert over.json()["detail"] == (
        "user 'alice' has 3 jobs pending or running; 3 more would be over this site's limit "
        "of 5 per user (railyard up --max-jobs-per-user) (hint: wait for some to end, or "
        "cancel some (railyard cancel -u USER -t PD))"
    )
    assert alice.post("/v1/jobs/batch", json={"jobs": [job, job]}).status_code == 201  # 5
    assert alice.post("/v1/jobs", json=job).status_code == 403
    assert alice.post("/v1/jobs", json={**job, "array": "0-5"}).status_code == 403  # alone over
    assert alice.delete("/v1/jobs/1").status_code == 200  # the array's 3 tasks end
    assert alice.post("/v1/jobs", json={**job, "array": "0-2"}).status_code == 201
    for _ in range(2):  # an admin's own jobs are not counted against a bound
        assert root.post("/v1/jobs", json={**job, "array": "0-9"}).status_code == 201
