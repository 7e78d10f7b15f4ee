"""The dashboard's round 3 (issue 60) through the app, on both stores: the jobs list's time
and exit columns, its page sizes and bulk actions (each job checked for the acting user's
rights, the CSRF field required); the queues page's borrowing limits and flags; the
overview's range picker, and why free GPUs stay free while jobs wait."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import update
from tests.control.conftest import FLAVOR
from tests.control.test_dashboard import app_for, form_csrf, login, submit

from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, QueueRow

pytestmark = pytest.mark.stores


def test_the_list_shows_times_exit_codes_and_page_sizes(
    store: Store, tmp_path: Path, tokens: dict[str, str]
) -> None:
    jobs = [submit(store, "alice", name=f"run{i}") for i in range(30)]
    with store.session() as session:
        session.execute(update(JobRow).where(JobRow.id == jobs[0]).values(
            state="failed", start_t_s=JobRow.submit_t_s, end_t_s=JobRow.submit_t_s + 5,
            exit_code=3))  # fmt: skip
    client = login(app_for(store, tmp_path), tokens["alice"])
    page = client.get("/ui/jobs", params={"rows": "25"}).text
    for header in ("submitted", "started", "ended", "exit"):
        assert f"<th>{header}</th>" in page
    assert page.count('name="job"') == 25
    assert "1-25 of 30" in page
    assert '<option value="25" selected>' in page
    failed = client.get("/ui/jobs", params={"state": "failed"}).text
    assert '<span class="num">3:0</span>' in failed
    assert client.get("/ui/jobs", params={"rows": "7"}).text.count('name="job"') == 30  # 50


def _bulk(client: object, action: str, ids: list[str], csrf: str | None) -> object:
    data: dict[str, object] = {"action": action, "job": ids}
    if csrf is not None:
        data["csrf"] = csrf
    return client.post("/ui/jobs/bulk", data=data, follow_redirects=False)  # type: ignore[attr-defined]


def test_bulk_actions_check_each_job(store: Store, tmp_path: Path,
                                     tokens: dict[str, str]) -> None:  # fmt: skip
    mine = [submit(store, "alice") for _ in range(3)]
    theirs = submit(store, "bob")
    client = login(app_for(store, tmp_path), tokens["alice"])
    csrf = form_csrf(client.get("/ui/jobs").text.split('id="bulk"', 1)[1])
    assert _bulk(client, "hold", mine, None).status_code == 403  # type: ignore[attr-defined]
    with store.session() as session:
        assert all(session.get(JobRow, j).hold is None for j in mine)  # type: ignore[union-attr]
    held = _bulk(client, "hold", [*mine[:2], theirs], csrf)
    assert held.status_code == 200  # type: ignore[attr-defined]
    assert "Held 2 job(s)" in held.text  # type: ignore[attr-defined]
    refused = re.search(r"<ul id=bulk-refused>(.*?)</ul>", held.text)  # type: ignore[attr-defined]
    assert refused is not None
    assert theirs in refused.group(1)
    cancelled = _bulk(client, "cancel", [mine[2], theirs], csrf)
    assert "Cancelled 1 job(s)" in cancelled.text  # type: ignore[attr-defined]
    released = _bulk(client, "release", mine[:2], csrf)
    assert "Released 2 job(s)" in released.text  # type: ignore[attr-defined]
    with store.session() as session:
        rows = {j: session.get(JobRow, j) for j in [*mine, theirs]}
        assert [rows[j].hold for j in mine[:2]] == [None, None]  # type: ignore[union-attr]
        assert rows[mine[2]].state == "cancelled"  # type: ignore[union-attr]
        assert rows[theirs].state == "pending"  # type: ignore[union-attr]
        assert rows[theirs].hold is None  # type: ignore[union-attr]
    assert _bulk(client, "delete", mine, csrf).status_code == 422  # type: ignore[attr-defined]


def test_queues_show_borrowing_and_overcommit(store: Store, tmp_path: Path,
                                              tokens: dict[str, str]) -> None:  # fmt: skip
    with store.session() as session:
        session.execute(update(QueueRow).where(QueueRow.name == "research").values(
            nominal_gpus={FLAVOR: 16}))  # fmt: skip
        session.execute(update(QueueRow).where(QueueRow.name == "default").values(
            borrowing_limit_gpus={FLAVOR: 4}, lending_limit_gpus={FLAVOR: 2}))  # fmt: skip
    page = login(app_for(store, tmp_path), tokens["root"]).get("/ui/queues").text
    assert "<th>borrowing limit</th>" in page
    assert f"sum to 24 {FLAVOR} GPUs on a cluster of 16" in page
    assert f"{FLAVOR}=4 (no parent: does nothing)" in page
    assert f"<td>{FLAVOR}=2</td>" in page  # the lending limit


def test_overview_range_and_why_gpus_stay_free(store: Store, tmp_path: Path,
                                               tokens: dict[str, str]) -> None:  # fmt: skip
    blocked = submit(store, "alice", gpus=4)
    other = submit(store, "bob", gpus=2)
    with store.session() as session:
        session.execute(update(JobRow).values(reason="Dependency"))
    client = login(app_for(store, tmp_path), tokens["alice"])
    page = client.get("/ui/").text
    why = page.split('id="why-free">', 1)[1].split("</table>", 1)[0]
    assert "16 GPUs free while 2 jobs wait" in why
    assert f"<td>{blocked}</td>" in why
    assert f"<td>{other}</td>" not in why  # bob's: not named to alice
    assert "another user" in why
    assert "It waits for the jobs it depends on." in why
    week = client.get("/ui/", params={"range": "7d"}).text
    assert "GPU utilization, last 7 days" in week
    assert ">-7 d</text>" in week
    assert "<b>7d</b>" in week
    assert "GPU utilization, last 6 hours" in client.get("/ui/?range=bogus").text
