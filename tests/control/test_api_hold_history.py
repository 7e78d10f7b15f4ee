"""Hold and release, and the list filters behind `queue` (MinJobAge) and `history` (sacct's
time window), through the REST API in-process on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import EventRow, JobRow


class Api:
    def __init__(self, store: Store, state_dir: Path, tokens: dict[str, str]) -> None:
        self.store, self.wakes, self.now = store, 0, 1_000_000.0
        app = create_app(store, wake=self._wake, state_dir=state_dir, clock=lambda: self.now)
        self.as_ = {
            name: TestClient(app, headers={"Authorization": f"Bearer {token}"})
            for name, token in tokens.items()
        }

    def _wake(self) -> None:
        self.wakes += 1

    def submit(self, user: str, **body: Any) -> list[str]:
        body.setdefault("command", ["true"])
        response = self.as_[user].post("/v1/jobs", json=body)
        assert response.status_code == 201, response.text
        return [j["id"] for j in response.json()]

    def post(self, user: str, path: str) -> tuple[int, Any]:
        response = self.as_[user].post(path)
        return response.status_code, response.json()

    def ids(self, as_user: str, **params: Any) -> list[str]:
        response = self.as_[as_user].get("/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        return [j["id"] for j in response.json()]

    def set_row(self, job_id: str, **values: Any) -> None:
        with self.store.session() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id).values(**values))


@pytest.fixture
def api(store: Store, tokens: dict[str, str], tmp_path: Path) -> Api:
    return Api(store, tmp_path / "state", tokens)


def test_user_hold_and_release(api: Api) -> None:
    [job] = api.submit("alice")
    wakes = api.wakes
    status, [held] = api.post("alice", f"/v1/jobs/{job}/hold")
    assert status == 200
    assert (held["hold"], held["reason"], held["state"]) == ("user", "JobHeldUser", "pending")
    assert api.wakes == wakes + 1
    status, [released] = api.post("alice", f"/v1/jobs/{job}/release")
    assert status == 200
    assert (released["hold"], released["reason"]) == (None, "")
    status, again = api.post("alice", f"/v1/jobs/{job}/release")  # not held: nothing to do
    assert (status, again) == (200, [])
    with api.store.session() as s:
        kinds = [e.kind for e in s.query(EventRow).filter(EventRow.job_id == job)]
    assert kinds == ["submitted", "hold", "release"]


def test_a_released_job_ages_from_its_release(api: Api) -> None:
    """Held a week, a job has not waited a week: its begin time moves to the release (Slurm's
    EligibleTime), so the scheduler does not take it for starving and put it ahead of every
    queue. A --begin later than the release stays."""
    [job] = api.submit("alice", hold=True)
    api.now += 8 * 86_400.0
    status, [released] = api.post("alice", f"/v1/jobs/{job}/release")
    assert (status, released["begin_t_s"]) == (200, api.now)
    later = api.now + 3600.0
    [begins] = api.submit("alice", hold=True, begin_t_s=later)
    status, [released] = api.post("alice", f"/v1/jobs/{begins}/release")
    assert released["begin_t_s"] == later


def test_an_admin_hold_only_an_admin_releases(api: Api) -> None:
    [job] = api.submit("alice")
    status, [held] = api.post("root", f"/v1/jobs/{job}/hold")
    assert (status, held["hold"], held["reason"]) == (200, "admin", "JobHeldAdmin")
    status, [still] = api.post("alice", f"/v1/jobs/{job}/hold")  # a user's hold adds nothing
    assert (status, still["hold"]) == (200, "admin")
    status, body = api.post("alice", f"/v1/jobs/{job}/release")
    assert status == 403
    assert body["detail"] == f"job {job} was held by an admin: only an admin can release it"
    status, [released] = api.post("root", f"/v1/jobs/{job}/release")
    assert (status, released["hold"]) == (200, None)
    [own] = api.submit("root")
    status, [mine] = api.post("root", f"/v1/jobs/{own}/hold")  # an admin's own job: user hold
    assert mine["hold"] == "user"


def test_hold_refusals(api: Api) -> None:
    [job] = api.submit("alice")
    status, body = api.post("bob", f"/v1/jobs/{job}/hold")
    assert (status, body["detail"]) == (404, f"no job '{job}'")  # others' ids do not leak
    api.set_row(job, state="running")
    status, body = api.post("alice", f"/v1/jobs/{job}/hold")
    assert (status, body["detail"]) == (
        409,
        f"job {job} is running: only a pending job can be held",
    )
    status, body = api.post("alice", "/v1/jobs/99/hold")
    assert status == 404


def test_hold_an_array_holds_its_pending_tasks(api: Api) -> None:
    assert api.submit("alice", array="0-3") == ["1"]  # the array's record
    tasks = api.ids("alice", array="1")
    api.set_row(tasks[0], state="running")
    status, held = api.post("alice", "/v1/jobs/1/hold")
    assert status == 200
    assert [j["id"] for j in held] == tasks[1:]
    status, released = api.post("alice", "/v1/jobs/1/release")
    assert [j["id"] for j in released] == tasks[1:]


def test_finished_jobs_stay_listed_for_a_while(api: Api) -> None:
    pending, done, old = (api.submit("alice")[0] for _ in range(3))
    api.set_row(done, state="failed", end_t_s=api.now - 10)
    api.set_row(old, state="completed", end_t_s=api.now - 1000)
    assert api.ids("alice", finished_within_s=300) == [pending, done]
    assert api.ids("alice", finished_within_s=0) == [pending]
    assert api.ids("alice", finished_within_s=300, state="failed") == [done]
    assert api.ids("alice") == [pending, done, old]  # no filter: everything, as before


def test_history_window_and_pages(api: Api) -> None:
    """A job is in [since, until] when it was submitted by `until` and had not ended before
    `since` (sacct's --starttime/--endtime)."""
    ids = [api.submit("alice")[0] for _ in range(4)]
    api.set_row(ids[0], submit_t_s=100.0, end_t_s=200.0, state="completed")  # before
    api.set_row(ids[1], submit_t_s=150.0, end_t_s=400.0, state="failed")  # overlaps start
    api.set_row(ids[2], submit_t_s=350.0, end_t_s=None, state="running")  # still running
    api.set_row(ids[3], submit_t_s=900.0, end_t_s=950.0, state="completed")  # after
    assert api.ids("alice", since=300, until=800) == [ids[1], ids[2]]
    assert api.ids("alice", since=300) == ids[1:]
    assert api.ids("alice", until=120) == [ids[0]]
    assert api.ids("alice", limit=2, offset=1) == ids[1:3]
    assert api.ids("bob", since=0) == []  # a user sees their own
    assert api.ids("root", since=0, user="alice") == ids
    response = api.as_["alice"].get("/v1/jobs", params={"since": -1})
    assert response.status_code == 422


def test_a_pending_job_is_in_the_window_once_it_is_eligible(api: Api) -> None:
    """A job waiting for its --begin is no job of a window that ends before that time
    (Slurm 22.05's sacct -S lists a pending job from its eligible time on; measured by
    benchmarks/slurm/compare_habits.py case 7)."""
    later, now = api.submit("alice")[0], api.submit("alice")[0]
    api.set_row(later, submit_t_s=100.0, begin_t_s=5000.0, end_t_s=None, state="pending")
    api.set_row(now, submit_t_s=100.0, begin_t_s=50.0, end_t_s=None, state="pending")
    assert api.ids("alice", since=0, until=800) == [now]
    assert api.ids("alice", since=0, until=6000) == [later, now]
