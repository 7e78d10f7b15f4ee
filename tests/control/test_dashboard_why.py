"""A pending job's "why" panel (both stores): its reason in words, its queue's quota and use,
the GPUs free, the jobs ahead of it, fair share; the twin's expected start asked apart, for
the owner only."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update
from tests.control.test_dashboard import app_for, login, submit

from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow

pytestmark = pytest.mark.stores


def test_a_pending_job_says_why_it_waits(store: Store, tmp_path: Path,
                                         tokens: dict[str, str]) -> None:  # fmt: skip
    for _ in range(2):
        submit(store, "alice", gpus=8)
    mine = submit(store, "alice", gpus=4)
    later = submit(store, "bob", gpus=2)
    with store.session() as session:
        session.execute(update(JobRow).values(reason="Resources"))
    client = login(app_for(store, tmp_path), tokens["alice"])
    page = client.get(f"/ui/jobs/{mine}").text
    panel = page.split("<h2>Why it waits</h2>", 1)[1].split("</table>", 1)[0]
    assert "<b>Resources</b>: Not enough GPUs of its flavor are free now" in panel
    assert "4 H100-SXM-80GB GPUs; 16 of that flavor are free now" in panel
    assert "quota 8, in use 0" in panel
    assert "2 pending job(s) of its queue" in panel  # the two older ones, not bob's later one
    assert 'id="start"' in panel
    start = client.get(f"/ui/jobs/{mine}/start").json()
    assert start["pending"] is True
    assert start["text"].startswith(("now", "in "))
    assert client.get(f"/ui/jobs/{later}/start").status_code == 404  # bob's: not hers
    assert "Why it waits" not in client.get("/ui/jobs/nope").text


def test_a_running_job_has_no_panel(store: Store, tmp_path: Path, tokens: dict[str, str]) -> None:
    job = submit(store, "alice", gpus=1)
    with store.session() as session:
        session.execute(update(JobRow).values(state="running", start_t_s=JobRow.submit_t_s))
    client = login(app_for(store, tmp_path), tokens["alice"])
    assert "Why it waits" not in client.get(f"/ui/jobs/{job}").text
    assert client.get(f"/ui/jobs/{job}/start").json() == {"pending": False, "start_t_s": None}
