"""Batch submission: one request, one transaction, all jobs or none."""

from __future__ import annotations

from tests.control.test_api import Api, api  # noqa: F401 - the fixture is used by name


def test_batch_stores_every_job(api: Api) -> None:  # noqa: F811
    body = {"jobs": [{"command": ["true"], "gpus": 1}, {"command": ["true"], "array": "0-2"}]}
    response = api.as_["alice"].post("/v1/jobs/batch", json=body)
    assert response.status_code == 201, response.text
    ids = [job["id"] for job in response.json()]
    assert len(ids) == 4
    assert ids[1:] == [f"{ids[1].split('_')[0]}_{i}" for i in range(3)]
    assert api.jobs_and_counter()[0] == 4


def test_batch_is_all_or_nothing(api: Api) -> None:  # noqa: F811
    before = api.jobs_and_counter()
    body = {"jobs": [{"command": ["true"]}, {"command": ["true"], "queue": "nope"}]}
    response = api.as_["alice"].post("/v1/jobs/batch", json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("jobs[1].queue: unknown queue 'nope'")
    assert api.jobs_and_counter() == before
