"""The overview (both stores): GPUs in use by queue and by user (a plain user's others summed
into one line), charts with their axes, and the last 7 days' utilization from accounting."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from sqlalchemy import update
from tests.control.test_dashboard import app_for, login, submit

from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, QueueMember, User
from railyard.control.store.usagedays import DAY_S, Ended, day_of, record_attempts

pytestmark = pytest.mark.stores


def _running(store: Store) -> None:
    """alice runs 4 GPUs in default, bob 2 in default and 8 in research (16 GPUs in all)."""
    jobs = [submit(store, "alice", gpus=4), submit(store, "bob", gpus=2),
            submit(store, "bob", gpus=8, queue="research")]  # fmt: skip
    with store.session() as session:
        session.execute(update(JobRow).where(JobRow.id.in_(jobs))
                        .values(state="running", start_t_s=JobRow.submit_t_s))  # fmt: skip


def _table(page: str, title: str) -> dict[str, str]:
    part = page.split(f"<h2>{title}</h2>", 1)[1].split("</table>", 1)[0]
    return dict(re.findall(r'<tr><td>([^<]*)</td><td><span class="num">(\d+)</span>', part))


def test_gpus_in_use_by_queue_and_user(store: Store, tmp_path: Path,
                                       tokens: dict[str, str]) -> None:  # fmt: skip
    with store.session() as session:
        session.execute(update(JobRow).values(state="completed"))
    with store.session() as session:  # bob may use research
        bob = session.query(User).filter_by(name="bob").one()
        session.add(QueueMember(queue="research", user_id=bob.id))
    _running(store)
    admin = login(app_for(store, tmp_path), tokens["root"]).get("/ui/").text
    assert _table(admin, "GPUs in use by queue") == {"research": "8", "default": "6"}
    assert _table(admin, "by user") == {"bob": "10", "alice": "4"}
    alice = login(app_for(store, tmp_path), tokens["alice"]).get("/ui/").text
    assert _table(alice, "GPUs in use by queue") == {"default": "6", "(others)": "8"}
    assert _table(alice, "by user") == {"alice": "4", "(others)": "10"}


def test_charts_have_axes_and_seven_days(store: Store, tmp_path: Path,
                                         tokens: dict[str, str]) -> None:  # fmt: skip
    now = time.time()
    yesterday = day_of(now) - DAY_S
    job = submit(store, "bob", gpus=16)
    with store.session() as session:  # 16 GPUs busy for 6 hours yesterday: 25% of the day
        session.execute(update(JobRow).where(JobRow.id == job).values(
            state="completed", submit_t_s=yesterday, start_t_s=yesterday + 3600,
            end_t_s=yesterday + 7 * 3600))  # fmt: skip
        record_attempts(session, [Ended(job, 0, "bob", "default", 16, yesterday + 3600,
                                        yesterday + 7 * 3600, "completed")])  # fmt: skip
    page = login(app_for(store, tmp_path), tokens["alice"]).get("/ui/").text
    week = page.split("GPUs held per day, last 7 days", 1)[1].split("</figure>", 1)[0]
    bars = re.findall(r"<rect x=[^>]*><title>([^<]*)</title>", week)
    assert len(bars) == 7
    assert bars[-2] == "25%"
    labels = re.findall(r'text-anchor="[a-z]+">([^<]*)</text>', week)
    assert labels[-2:] == [time.strftime("%m-%d", time.gmtime(d)) for d in (yesterday, now)]
    assert ">-6 h</text>" in page
    assert ">100%</text>" in page
