"""``GET /v1/report`` (sreport) on a small fixed history, against GPU-hours worked out by hand;
and the loop writing one accounting row per attempt it ends."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from tests.control.conftest import FLAVOR, Seeder
from tests.control.loop_helpers import Cluster, states, step_until, stop_all

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import AttemptRow, JobRow, UsageDayRow, User
from railyard.control.store.usagedays import Ended, record_attempts

pytestmark = pytest.mark.stores

D = datetime(2026, 11, 2, tzinfo=UTC).timestamp()  # a Monday, 00:00 UTC
H = 3600.0
NOW = D + 47 * H  # the next day, 23:00


@pytest.fixture
def api(store: Store, seeder: Seeder, tmp_path: Path) -> dict[str, TestClient]:
    """alice (queue vision, under research): job 1 ran 4 GPUs from D-1 22:00 to D 02:00, was
    requeued, ran again D 03:00-04:30. bob (default): job 2, 8 GPUs, D 10:00 to D+1 10:00.
    carol (default): job 3, 2 GPUs, running since D+1 20:00; now is D+1 23:00. 16 GPUs."""
    seeder.nodes(2, 8)
    seeder.queue("default")
    seeder.queue("research")
    seeder.queue("vision", parent="research")
    tokens = {
        "root": seeder.user("root", admin=True),
        "alice": seeder.user("alice", queues=("vision",)),
        "bob": seeder.user("bob", queues=("default",)),
        "carol": seeder.user("carol", queues=("default",)),
    }
    with store.session() as session:
        record_attempts(session, [
            Ended("1", 0, "alice", "vision", 4, D - 2 * H, D + 2 * H, "requeue"),
            Ended("1", 1, "alice", "vision", 4, D + 3 * H, D + 4.5 * H, "completed"),
            Ended("2", 0, "bob", "default", 8, D + 10 * H, D + 34 * H, "completed"),
        ])  # fmt: skip
        carol = session.scalars(select(User).where(User.name == "carol")).one()
        session.add(JobRow(id="3", number=3, user_id=carol.id, queue="default", command=["x"],
                           flavor=FLAVOR, workers=1, gpus_per_worker=2, state="running",
                           submit_t_s=D + 19 * H, start_t_s=D + 44 * H,
                           updated_t_s=D + 44 * H))  # fmt: skip
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, clock=lambda: NOW)
    return {
        name: TestClient(app, headers={"Authorization": f"Bearer {token}"})
        for name, token in tokens.items()
    }


def _report(client: TestClient, **params: Any) -> dict[str, Any]:
    response = client.get("/v1/report", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _by_day(body: dict[str, Any], key: str) -> dict[tuple[int, str], float]:
    return {(round((line["start_t_s"] - D) / 86400), line[key]): round(line["gpu_hours"], 6)
            for line in body["lines"]}  # fmt: skip


def test_gpu_hours_by_user_and_day_match_the_hand_count(api: dict[str, TestClient]) -> None:
    body = _report(api["root"], start=D - 24 * H, end=D + 72 * H, period="day", by="user")
    # D-1: alice 2 h x 4. D: alice 2 h x 4 + 1.5 h x 4, bob 14 h x 8. D+1: bob 10 h x 8,
    # carol 3 h x 2 (running: up to now). D+2 is after now: cut off.
    assert _by_day(body, "user") == {
        (-1, "alice"): 8.0, (0, "bob"): 112.0, (0, "alice"): 14.0,
        (1, "bob"): 80.0, (1, "carol"): 6.0,
    }  # fmt: skip
    assert (body["cluster_gpus"], body["end_t_s"]) == (16, NOW)
    day0 = [line for line in body["lines"] if line["start_t_s"] == D]
    assert [line["user"] for line in day0] == ["bob", "alice"]  # largest first
    assert day0[0]["share"] == pytest.approx(112 / (16 * 24))


def test_windows_that_cut_days_count_the_cut_parts(api: dict[str, TestClient]) -> None:
    """From D 01:00 to D+1 12:00: alice's first attempt's last hour, her second whole; bob
    from 10:00 to 10:00 the next day; carol's run is after the window."""
    body = _report(api["root"], start=D + H, end=D + 36 * H, by="user")
    assert {line["user"]: line["gpu_hours"] for line in body["lines"]} == {
        "alice": 4.0 + 6.0, "bob": 192.0,
    }  # fmt: skip
    inside = _report(api["root"], start=D + 1.5 * H, end=D + 3.5 * H, by="user")  # one day
    assert {line["user"]: line["gpu_hours"] for line in inside["lines"]} == {"alice": 2.0 + 2.0}
    now = _report(api["root"], start=D + 46 * H, by="user")  # the last hour: carol only
    assert {line["user"]: line["gpu_hours"] for line in now["lines"]} == {"carol": 2.0}


def test_accounts_are_queue_roots_and_weeks_start_on_monday(api: dict[str, TestClient]) -> None:
    body = _report(api["root"], start=D - 24 * H, end=NOW, by="account")
    assert {line["account"]: line["gpu_hours"] for line in body["lines"]} == {
        "default": 198.0, "research": 22.0,
    }  # fmt: skip
    weeks = _report(api["root"], start=D - 24 * H, end=NOW, period="week", by=["queue", "user"])
    assert {(line["start_t_s"], line["queue"], line["user"]): line["gpu_hours"]
            for line in weeks["lines"]} == {
        (D - 24 * H, "vision", "alice"): 8.0,  # Sunday: the week before, clipped to the window
        (D, "vision", "alice"): 14.0, (D, "default", "bob"): 192.0, (D, "default", "carol"): 6.0,
    }  # fmt: skip


def test_a_plain_user_sees_only_their_own_usage(api: dict[str, TestClient]) -> None:
    body = _report(api["alice"], start=D - 24 * H, by="user", user="bob")
    assert {line["user"] for line in body["lines"]} == {"alice"}
    assert sum(line["gpu_hours"] for line in body["lines"]) == 22.0


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": D, "period": "fortnight"}, "period"),
        ({"start": D, "by": "team"}, "by"),
        ({"start": NOW + H}, "start"),
        ({"start": D, "end": D - H}, "end"),
        ({"start": 0, "period": "day"}, "period"),  # 20,000 days: ask for months
    ],
)
def test_bad_windows_are_refused_with_the_field(
    api: dict[str, TestClient], params: dict[str, Any], field: str
) -> None:
    response = api["root"].get("/v1/report", params=params)
    assert response.status_code == 422, response.text
    assert field in response.text


def test_the_loop_writes_one_accounting_row_per_attempt(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, gpus=2)
    [done] = cluster.submit(command=["true"], gpus=2)
    [long] = cluster.submit(command=["sleep", "60"], gpus=1)
    try:
        step_until(cluster.loop, lambda: states(cluster.store)[long] == "running")
        step_until(cluster.loop, lambda: states(cluster.store)[done] == "completed")
        with cluster.store.session() as session:
            session.execute(JobRow.__table__.update().where(JobRow.id == long)
                            .values(state="cancelling"))  # fmt: skip
        step_until(cluster.loop, lambda: states(cluster.store)[long] == "cancelled")
        with cluster.store.session() as session:
            rows: dict[str, list[AttemptRow]] = {}
            for r in session.scalars(select(AttemptRow).order_by(AttemptRow.start_t_s)):
                rows.setdefault(r.job_id, []).append(r)  # a run over midnight: two rows
            jobs = {j.id: j for j in session.scalars(select(JobRow))}
            daily = sum(d.gpu_s for d in session.scalars(select(UsageDayRow)))
        assert set(rows) == {done, long}
        for job_id, gpus, state in ((done, 2, "completed"), (long, 1, "cancelled")):
            pieces, job = rows[job_id], jobs[job_id]
            assert {(r.gpus, r.state, r.attempt, r.user_name) for r in pieces} == {
                (gpus, state, 0, "alice")
            }
            assert (pieces[0].start_t_s, pieces[-1].end_t_s) == (job.start_t_s, job.end_t_s)
        assert daily == pytest.approx(
            sum(r.gpus * (r.end_t_s - r.start_t_s) for pieces in rows.values() for r in pieces)
        )
    finally:
        stop_all(cluster.loop)
