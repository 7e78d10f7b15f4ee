"""The dashboard over plain HTTP (both stores): log in with a token, each page's content, a
user sees only their own jobs and queues (another's job page is "no job"), actions need the CSRF
field and go through the same checks as the API. tests/web drives it in a real browser."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, NodeRow, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases import jobs
from railyard.control.usecases.loopstatus import LoopHealth
from railyard.web.routes import router


def app_for(store: Store, tmp_path: Path) -> TestClient:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, extra_routers=[router()])
    return TestClient(app)


def form_csrf(html: str) -> str:
    """The CSRF value of the first form on a page."""
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


def login(client: TestClient, token: str) -> TestClient:
    """Through the form, as a browser does: its CSRF value goes with the pre-login cookie."""
    csrf = form_csrf(client.get("/ui/login").text)
    done = client.post("/ui/login", data={"token": token, "csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303, done.text
    assert "httponly" in done.headers["set-cookie"].lower()
    assert "samesite=strict" in done.headers["set-cookie"].lower()
    return client


def submit(store: Store, user: str, **fields: object) -> str:
    with store.session() as session:
        actor = session.query(User).filter_by(name=user).one()
        spec = JobSubmit.model_validate({"command": ["true"], "gpus": 1, **fields})
        [row] = jobs.submit(session, actor, spec, time.time(), spool_dir=Path("/nonexistent"))
        return row.id


@pytest.fixture
def client(store: Store, tmp_path: Path, tokens: dict[str, str]) -> TestClient:
    return app_for(store, tmp_path)


def test_pages_need_a_login(client: TestClient) -> None:
    for path in ("/ui/", "/ui/jobs", "/ui/fabric", "/ui/queues", "/ui/jobs/1"):
        found = client.get(path, follow_redirects=False)
        assert found.status_code == 303
        assert found.headers["location"] == "/ui/login"
    csrf = form_csrf(client.get("/ui/login").text)
    bad = client.post("/ui/login", data={"token": "ry_nope", "csrf": csrf},
                      follow_redirects=False)  # fmt: skip
    assert bad.status_code == 401
    assert "invalid" in bad.text or "unknown" in bad.text


def test_a_user_sees_only_their_own_jobs(
    client: TestClient, store: Store, tokens: dict[str, str]
) -> None:
    mine = submit(store, "alice", name="alices-run")
    theirs = submit(store, "bob", name="bobs-run")
    login(client, tokens["alice"])
    listed = client.get("/ui/jobs").text
    assert "alices-run" in listed
    assert "bobs-run" not in listed
    assert client.get(f"/ui/jobs/{mine}").status_code == 200
    # another user's job answers as one that does not exist (ids don't leak, as in the API)
    other, missing = client.get(f"/ui/jobs/{theirs}"), client.get("/ui/jobs/999")
    assert (other.status_code, missing.status_code) == (404, 404)
    assert "bobs-run" not in other.text
    assert other.text.replace(f"No job {theirs}.", "No job 999.") == missing.text
    start, none = client.get(f"/ui/jobs/{theirs}/start"), client.get("/ui/jobs/999/start")
    assert (start.status_code, start.json()) == (404, {"detail": f"no job {theirs}"})
    assert (none.status_code, none.json()) == (404, {"detail": "no job 999"})
    assert client.get(f"/ui/jobs/{theirs}/log").status_code == 403
    assert client.get("/ui/jobs/999/log").status_code == 403


def test_an_admin_sees_everyone_and_filters(
    client: TestClient, store: Store, tokens: dict[str, str]
) -> None:
    submit(store, "alice", name="alices-run")
    submit(store, "bob", name="bobs-run")
    login(client, tokens["root"])
    listed = client.get("/ui/jobs").text
    assert "alices-run" in listed
    assert "bobs-run" in listed
    only_bob = client.get("/ui/jobs", params={"user": "bob"}).text
    assert "bobs-run" in only_bob
    assert "alices-run" not in only_bob
    partial = client.get("/ui/jobs", params={"partial": "1"}).text
    assert partial.startswith("<table>")  # the fragment the page polls
    assert "alices-run" in partial


def test_overview_fabric_and_queues(client: TestClient, store: Store, tokens: dict) -> None:
    job = submit(store, "alice")
    with store.session() as session:
        row = session.get(JobRow, job)
        assert row is not None
        row.state, row.placement, row.start_t_s = "running", {"n01": [0]}, time.time()
        node = session.get(NodeRow, "n02")
        assert node is not None
        node.state, node.reason = "draining", "new cables"
    login(client, tokens["alice"])
    overview = client.get("/ui/").text
    assert re.search(
        r"H100-SXM-80GB</td><td><span class=\"num\">16</span></td><td><span "
        r"class=\"num\">1</span></td><td><span class=\"num\">7</span></td><td>"
        r"<span class=\"num\">8</span>",
        overview,
    )  # total, used, free, draining
    fabric = client.get("/ui/fabric", params={"job": job}).text
    assert 'id="node-n02" data-state="draining"' in fabric
    assert "1 node(s), 1 leaf group(s)" in fabric
    assert f'title="job {job}"' in fabric
    assert "drain</button>" not in fabric  # not an admin
    queues = client.get("/ui/queues").text
    assert "default" in queues
    assert "research" not in queues  # alice is not a member
    whatif = client.get("/ui/queues/whatif")
    assert whatif.status_code == 200


def test_actions_need_the_csrf_field_and_the_right_user(
    client: TestClient, store: Store, tokens: dict[str, str]
) -> None:
    job = submit(store, "alice")
    login(client, tokens["alice"])
    forged = client.post(f"/ui/jobs/{job}/cancel", data={}, follow_redirects=False)
    assert forged.status_code == 403
    csrf = form_csrf(client.get(f"/ui/jobs/{job}").text)
    done = client.post(f"/ui/jobs/{job}/hold", data={"csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303
    with store.session() as session:
        row = session.get(JobRow, job)
        assert row is not None
        assert row.hold == "user"
    drain = client.post("/ui/nodes/n01/drain", data={"csrf": csrf})
    assert drain.status_code == 403  # admins only, as in the API
    with store.session() as session:
        node = session.get(NodeRow, "n01")
        assert node is not None
        assert node.state == "ready"


def test_the_job_page_shows_history_and_not_the_environments_values(
    client: TestClient, store: Store, tokens: dict[str, str]
) -> None:
    job = submit(store, "alice", env={"WANDB_API_KEY": "secret-value"})
    login(client, tokens["alice"])
    shown = client.get(f"/ui/jobs/{job}").text
    assert "WANDB_API_KEY" in shown
    assert "secret-value" not in shown
    assert "submit" in shown  # the history's first event


def test_the_overview_says_when_the_loop_is_failing(
    store: Store, tmp_path: Path, tokens: dict[str, str]
) -> None:
    health = LoopHealth()
    app = create_app(
        store, wake=lambda: None, state_dir=tmp_path, loop_health=health, extra_routers=[router()]
    )
    job = submit(store, "bob")
    admin, alice = login(TestClient(app), tokens["root"]), login(TestClient(app), tokens["alice"])
    assert "scheduler loop: ok" in admin.get("/ui/").text
    with store.session() as session:  # a cancel whose processes never reported an end
        row = session.get(JobRow, job)
        assert row is not None
        row.state, row.updated_t_s = "cancelling", time.time() - 3600
    seen = admin.get("/ui/").text
    assert "Scheduler loop: failing" in seen
    assert f"1 job stuck past their deadline: 1 cancelling (ids {job})" in seen
    theirs = alice.get("/ui/").text  # another user's job is counted, never named
    assert "scheduler loop: 1 jobs stuck (1 cancelling)" in theirs
    assert f"ids {job}" not in theirs
