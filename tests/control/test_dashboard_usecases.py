"""The dashboard's read use-cases (control.usecases) on both stores: each decides itself what
a plain user may see (their own jobs, never another's named) and an admin sees all; "pending
by reason" is counted once, so the overview and /metrics give the same labels and counts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session
from tests.control.metrics_helpers import samples, scrape, value
from tests.control.test_dashboard import app_for, login, submit

from railyard.control.errors import Forbidden, Invalid, NotFound
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, User
from railyard.control.usecases.fabric import fabric_view
from railyard.control.usecases.jobviews import job_detail, job_filters, read_job_log
from railyard.control.usecases.loopstatus import LoopHealth
from railyard.control.usecases.overview import loop_report, pending_by_reason, pending_counts
from railyard.control.usecases.whatif import WhatIfInput, expected_starts


def _user(session: Session, name: str) -> User:
    return session.query(User).filter_by(name=name).one()


def _set(store: Store, job_id: str, **fields: object) -> None:
    with store.session() as session:
        row = session.get(JobRow, job_id)
        assert row is not None
        for key, value_ in fields.items():
            setattr(row, key, value_)


def test_pending_by_reason_is_one_count_for_the_overview_and_metrics(
    store: Store, tmp_path: Path, tokens: dict[str, str]
) -> None:
    """Before, the overview cut a reason at " (" and /metrics took its leading word, so
    "LaunchFailed after 3 tries: ..." was a row of its own on the page (fails before)."""
    details = ["LaunchFailed after 3 tries: exec format error", "LaunchFailed (try 1 of 3): x"]
    for reason in details:
        _set(store, submit(store, "alice"), reason=reason)
    _set(store, submit(store, "bob"), reason="Resources")
    with store.session() as session:
        assert pending_counts(session) == {("default", "LaunchFailed"): 2,
                                           ("default", "Resources"): 1}  # fmt: skip
        assert pending_by_reason(session, _user(session, "alice")) == [("LaunchFailed", 2)]
        assert pending_by_reason(session, _user(session, "root")) == [
            ("LaunchFailed", 2), ("Resources", 1)]  # fmt: skip
    page = login(app_for(store, tmp_path), tokens["alice"]).get("/ui/").text
    assert '<td>LaunchFailed</td><td><span class="num">2</span>' in page
    assert "exec format error" not in page
    found = samples(scrape(TestClient(app_for(store, tmp_path).app), tokens["root"]))
    assert value(found, "railyard_jobs_pending", queue="default", reason="LaunchFailed") == 2


def test_a_plain_user_never_sees_another_users_job_named(
    store: Store, tokens: dict[str, str]
) -> None:
    mine, theirs = submit(store, "alice"), submit(store, "bob")
    _set(store, mine, state="running", placement={"n01": [0]}, start_t_s=time.time())
    _set(store, theirs, state="running", placement={"n01": [1], "n02": [0]})
    with store.session() as session:
        alice, root = _user(session, "alice"), _user(session, "root")
        view = fabric_view(session, alice, theirs)  # asking for bob's job shows nothing
        assert view.focus is None
        assert not view.focus_nodes
        n01 = next(n for n in view.nodes if n.name == "n01")
        assert [(g.in_use, g.job_id) for g in n01.gpus[:3]] == [
            (True, mine), (True, None), (False, None)]  # fmt: skip
        assert fabric_view(session, alice, mine).focus_nodes == {"n01"}
        assert fabric_view(session, root, theirs).focus_nodes == {"n01", "n02"}
        refusals = []
        for job_id in (theirs, "999"):  # another user's job answers as a missing one
            with pytest.raises(NotFound) as refused:
                job_detail(session, alice, job_id, time.time())
            refusals.append(str(refused.value).replace(job_id, "ID"))
        assert refusals[0] == refusals[1]
        assert job_detail(session, root, theirs, time.time()).line.user == "bob"
        with pytest.raises(Forbidden):
            read_job_log(session, alice, theirs, 0, 0, Path("/nonexistent"), None)
        with pytest.raises(Invalid):
            read_job_log(session, alice, mine, 5, 0, Path("/nonexistent"), None)
        assert job_filters(session, alice).users == []
        assert job_filters(session, root).users == ["alice", "bob", "root"]


def test_the_twin_sees_every_job_and_the_viewer_only_theirs(
    store: Store, tokens: dict[str, str]
) -> None:
    mine, theirs = submit(store, "alice", gpus=2), submit(store, "bob")
    seen: list[WhatIfInput] = []

    def simulate(found: WhatIfInput) -> dict[str, float | None]:
        seen.append(found)
        return {j.job_id: 60.0 for j in found.jobs}

    with store.session() as session:
        alice, root = _user(session, "alice"), _user(session, "root")
        expected = expected_starts(session, alice, time.time(), simulate)
        assert [(e.job_id, e.gpus, e.start_in_s) for e in expected] == [(mine, 2, 60.0)]
        assert {j.job_id for j in seen[0].jobs} == {mine, theirs}  # bob's job still counts
        assert {e.job_id for e in expected_starts(session, root, time.time(), simulate)} == {
            mine, theirs}  # fmt: skip


def test_stuck_jobs_are_named_to_an_admin_and_counted_to_a_user(
    store: Store, tokens: dict[str, str]
) -> None:
    job = submit(store, "bob")
    _set(store, job, state="cancelling", updated_t_s=time.time() - 3600)
    with store.session() as session:
        alice, root = _user(session, "alice"), _user(session, "root")
        assert loop_report(session, None, alice, time.time()) is None  # no loop: nothing said
        admin = loop_report(session, LoopHealth(), root, time.time())
        user = loop_report(session, LoopHealth(), alice, time.time())
    assert admin is not None
    assert user is not None
    assert not admin.ok
    assert any(f"ids {job}" in line for line in admin.lines)
    assert user.lines == ("scheduler loop: 1 jobs stuck (1 cancelling)",)
