"""``scontrol update`` of a pending job through ``PATCH /v1/jobs/{id}`` and ``railyard update``
(control/usecases/jobupdate.py), on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow

pytestmark = pytest.mark.stores  # compare-and-set writes on each store


@pytest.fixture
def as_(store: Store, tokens: dict[str, str], tmp_path: Path) -> dict[str, TestClient]:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path / "state")
    return {n: TestClient(app, headers={"Authorization": f"Bearer {t}"}) for n, t in tokens.items()}


def _submit(client: TestClient, **body: Any) -> dict[str, Any]:
    answer = client.post("/v1/jobs", json={"command": ["true"], **body})
    assert answer.status_code == 201, answer.text
    job: dict[str, Any] = answer.json()[0]
    return job


def test_a_user_lowers_a_time_limit_and_only_an_admin_raises_it(
    as_: dict[str, TestClient], store: Store
) -> None:
    alice, root = as_["alice"], as_["root"]
    job = _submit(alice, time="1:00:00")
    with store.session() as session:
        stamp = session.get(JobRow, job["id"]).updated_t_s  # type: ignore[union-attr]
    [lower] = alice.patch(f"/v1/jobs/{job['id']}", json={"time": "30"}).json()
    assert lower["walltime_s"] == 1800
    with store.session() as session:
        assert session.get(JobRow, job["id"]).updated_t_s > stamp  # type: ignore[union-attr]
    raised = alice.patch(f"/v1/jobs/{job['id']}", json={"time": "2:00:00"})
    assert raised.status_code == 403
    assert raised.json()["detail"] == (
        f"time limit 2:00:00 is above job {job['id']}'s 1800 s: only an admin may raise it "
        "(hint: give a shorter limit, or ask an admin)"
    )
    [by_admin] = root.patch(f"/v1/jobs/{job['id']}", json={"time": "2:00:00"}).json()
    assert by_admin["walltime_s"] == 7200
    unlimited = alice.patch(f"/v1/jobs/{job['id']}", json={"time": "UNLIMITED"})
    assert unlimited.status_code == 403


def test_priority_dependency_and_refusals(as_: dict[str, TestClient], store: Store) -> None:
    alice, bob = as_["alice"], as_["bob"]
    job, other = _submit(alice), _submit(alice)
    above = alice.patch(f"/v1/jobs/{job['id']}", json={"priority": "critical"})
    assert above.status_code == 403
    assert "above what queue 'default' allows its members" in above.json()["detail"]
    [low] = alice.patch(f"/v1/jobs/{job['id']}", json={"priority": "low"}).json()
    assert low["priority"] == 100
    dep = {"dependency": f"afterok:{other['id']}"}
    [waiting] = alice.patch(f"/v1/jobs/{job['id']}", json=dep).json()
    assert waiting["dependency"] == f"afterok:{other['id']}"
    unknown = alice.patch(f"/v1/jobs/{job['id']}", json={"dependency": "afterok:999"})
    assert (unknown.status_code, unknown.json()["detail"].split(" (")[0]) == (
        422,
        "dependency: no job 999",
    )
    itself = alice.patch(f"/v1/jobs/{job['id']}", json={"dependency": f"afterany:{job['id']}"})
    assert (itself.status_code, itself.json()["detail"]) == (
        422,
        f"dependency: job {job['id']} cannot wait for itself "
        "(hint: name other jobs (railyard queue))",
    )
    [cleared] = alice.patch(f"/v1/jobs/{job['id']}", json={"dependency": ""}).json()
    assert cleared["dependency"] is None
    # free to run from now, it ages from now: its begin time moves there (EligibleTime)
    assert cleared["begin_t_s"] is not None
    assert cleared["begin_t_s"] >= waiting["submit_t_s"]
    assert alice.patch(f"/v1/jobs/{job['id']}", json={}).status_code == 422
    assert bob.patch(f"/v1/jobs/{job['id']}", json={"time": "10"}).status_code == 404
    with store.session() as session:
        row = session.get(JobRow, other["id"])
        assert row is not None
        row.state = "running"
    started = alice.patch(f"/v1/jobs/{other['id']}", json={"priority": "low"})
    assert started.status_code == 409
    assert started.json()["detail"] == (
        f"job {other['id']} is running: only a pending job can be updated "
        "(a running job's time limit can)"
    )
    [shorter] = alice.patch(f"/v1/jobs/{other['id']}", json={"time": "10"}).json()
    assert (shorter["state"], shorter["walltime_s"]) == ("running", 600)
    with store.session() as session:
        row = session.get(JobRow, other["id"])
        assert row is not None
        row.state = "completed"
    ended = alice.patch(f"/v1/jobs/{other['id']}", json={"time": "5"})
    assert (ended.status_code, ended.json()["detail"]) == (
        409,
        f"job {other['id']} is completed: only a pending or running job can be updated",
    )


def test_a_limit_changes_by_an_amount_and_only_an_admin_adds_one(
    as_: dict[str, TestClient],
) -> None:
    """scontrol's TimeLimit=+T / -T: each job's own limit changes by T."""
    alice, root = as_["alice"], as_["root"]
    job = _submit(alice, time="1:00:00")
    [less] = alice.patch(f"/v1/jobs/{job['id']}", json={"time": "-15"}).json()
    assert less["walltime_s"] == 45 * 60
    more = alice.patch(f"/v1/jobs/{job['id']}", json={"time": "+15"})
    assert (more.status_code, more.json()["detail"]) == (
        403,
        f"time limit +15 raises job {job['id']}'s: only an admin may raise it "
        "(hint: give a shorter limit, or ask an admin)",
    )
    [more] = root.patch(f"/v1/jobs/{job['id']}", json={"time": "+1:15:00"}).json()
    assert more["walltime_s"] == 2 * 3600
    gone = alice.patch(f"/v1/jobs/{job['id']}", json={"time": "-2:00:00"})
    assert (gone.status_code, gone.json()["detail"]) == (
        422,
        f"time: -2:00:00 would leave job {job['id']} a limit of 0 s "
        "(hint: keep it between 1 s and 3660 days)",
    )
    unlimited = _submit(alice)
    none = root.patch(f"/v1/jobs/{unlimited['id']}", json={"time": "+10"})
    assert (none.status_code, none.json()["detail"]) == (
        422,
        f"time: job {unlimited['id']} has no time limit of its own to change by +10 "
        "(hint: give a whole limit, e.g. TimeLimit=2:00:00)",
    )
    bad = root.patch(f"/v1/jobs/{job['id']}", json={"time": "+UNLIMITED"})
    assert bad.status_code == 422
    assert "bad time change '+UNLIMITED'" in bad.json()["detail"]


def test_an_arrays_id_updates_its_pending_tasks(as_: dict[str, TestClient]) -> None:
    alice = as_["alice"]
    array = _submit(alice, array="0-2", time="1:00:00")
    parent = array["array_parent"] or array["id"]
    [first] = alice.patch(f"/v1/jobs/{parent}", json={"time": "20"}).json()
    assert (first["id"], first["walltime_s"]) == (f"{parent}_0", 1200)
    tasks = alice.get("/v1/jobs", params={"array": parent}).json()
    assert sorted(t["id"] for t in tasks) == [f"{parent}_{i}" for i in range(3)]
    assert {t["walltime_s"] for t in tasks} == {1200}


def test_an_arrays_update_reads_no_task_but_the_first_and_the_one_it_names(
    as_: dict[str, TestClient],
) -> None:
    """An array's update is one statement: a 300-task array's change loads the task it
    answers with and, when a check fails, the task the error names, never every task (10,000
    held the store's write lock 2-3 s while another user's submit waited)."""
    alice = as_["alice"]
    array = _submit(alice, array="0-299", time="1:00:00")
    parent = array["array_parent"] or array["id"]
    assert alice.patch(f"/v1/jobs/{parent}_7", json={"time": "5"}).is_success
    loaded: list[str] = []

    def count(row: JobRow, _context: object) -> None:
        loaded.append(row.id)

    event.listen(JobRow, "load", count)
    try:
        [first] = alice.patch(f"/v1/jobs/{parent}", json={"time": "-2"}).json()
        assert (first["id"], first["walltime_s"]) == (f"{parent}_0", 3480)
        assert len(set(loaded)) <= 2, loaded[:5]
        loaded.clear()
        short = alice.patch(f"/v1/jobs/{parent}", json={"time": "-4"})
        assert (short.status_code, short.json()["detail"].split(" (")[0]) == (
            422,
            f"time: -4 would leave job {parent}_7 a limit of -60 s",
        )
        raised = alice.patch(f"/v1/jobs/{parent}", json={"time": "30"})
        assert (raised.status_code, raised.json()["detail"].split(":")[0]) == (
            403,
            f"time limit 30 is above job {parent}_7's 180 s",
        )
        assert len(set(loaded)) <= 4, loaded[:5]
    finally:
        event.remove(JobRow, "load", count)
    tasks = alice.get("/v1/jobs", params={"array": parent}).json()
    assert sorted(t["walltime_s"] for t in tasks)[:2] == [180, 3480]


def test_removing_an_arrays_dependency_dates_only_the_tasks_that_had_one(
    as_: dict[str, TestClient],
) -> None:
    """`--dependency ""` on an array's id frees each task from now if it waited on one; a
    task that did not keeps its begin time (it has been free to run, and ageing: a reset
    would push it back in line)."""
    alice = as_["alice"]
    other = _submit(alice)
    array = _submit(alice, array="0-2")
    task = f"{array['id']}_1"
    assert alice.patch(f"/v1/jobs/{task}", json={"dependency": f"afterok:{other['id']}"}).is_success
    assert alice.patch(f"/v1/jobs/{array['id']}", json={"dependency": ""}).is_success
    tasks = alice.get("/v1/jobs", params={"array": array["array_parent"] or array["id"]}).json()
    begins = {j["id"]: j["begin_t_s"] for j in tasks}
    assert begins.pop(task) is not None
    assert begins == {f"{array['id']}_0": None, f"{array['id']}_2": None}


def test_nice_moves_the_priority_and_a_name_is_renamed(as_: dict[str, TestClient]) -> None:
    """scontrol update Nice= / JobName=: the priority moves by the nice's difference (the
    class asked stays: Priority shows it less the nice); a negative nice is an admin's."""
    alice, root = as_["alice"], as_["root"]
    job = _submit(alice, priority="normal", nice=10)
    assert job["priority"] == 490
    [nicer] = alice.patch(f"/v1/jobs/{job['id']}", json={"nice": 100, "name": "renamed"}).json()
    assert (nicer["priority"], nicer["name"]) == (400, "renamed")
    below = alice.patch(f"/v1/jobs/{job['id']}", json={"nice": -5})
    assert (below.status_code, below.json()["detail"].split(" (")[0]) == (
        403,
        "nice -5 raises the job's priority: only an admin may give a negative nice",
    )
    [by_admin] = root.patch(f"/v1/jobs/{job['id']}", json={"nice": -5}).json()
    assert by_admin["priority"] == 505
    [both] = alice.patch(f"/v1/jobs/{job['id']}", json={"nice": 1, "priority": "low"}).json()
    assert both["priority"] == 99  # low (100) less the new nice
    floor = alice.patch(f"/v1/jobs/{job['id']}", json={"nice": 1000}).json()[0]
    assert floor["priority"] == 0
    bad = alice.patch(f"/v1/jobs/{job['id']}", json={"name": "two\nlines"})
    assert bad.status_code == 422


def test_an_arrays_throttle_in_one_statement(as_: dict[str, TestClient]) -> None:
    """ArrayTaskThrottle= answers with the array's first task and changes them all; bob may
    not touch alice's array (404: ids don't leak)."""
    alice, bob = as_["alice"], as_["bob"]
    array = _submit(alice, array="0-2%1", hold=True)
    parent = array["array_parent"] or array["id"].split("_")[0]
    [shown] = alice.patch(f"/v1/jobs/{parent}", json={"array_throttle": 2}).json()
    assert (shown["id"], shown["array"]) == (f"{parent}_0", "0-2%2")
    tasks = alice.get("/v1/jobs", params={"array": parent}).json()
    assert {t["array"] for t in tasks} == {"0-2%2"}
    assert bob.patch(f"/v1/jobs/{parent}", json={"array_throttle": 5}).status_code == 404
