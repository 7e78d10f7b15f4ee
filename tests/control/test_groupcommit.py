"""Group commit of single submissions (control/usecases/groupcommit.py): requests that wait
share one transaction, yet each gets its own answer; a refused one never fails another's."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from railyard.control.api.app import create_app
from railyard.control.errors import Forbidden, Invalid
from railyard.control.store.database import Store
from railyard.control.store.tables import EventRow, JobRow, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases.groupcommit import GroupCommit, Pending, SubmitRequest, SubmitStore

pytestmark = pytest.mark.stores  # it tests one transaction on each store

GOOD = {"command": ["true"], "gpus": 1}


def _user(store: Store, name: str) -> User:
    with store.session() as session:
        user = session.scalars(select(User).where(User.name == name)).one()
    return user


def _count(store: Store, table: type[JobRow] | type[EventRow]) -> int:
    with store.session() as session:
        return session.scalar(select(func.count()).select_from(table)) or 0


def test_one_transaction_answers_each_member_alone(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    """Four requests in one group: two good (two users), an unknown queue (422) and a queue
    alice is not a member of (403). The good ones are stored with their own ids and one event each;
    each refused one gets its own error and stores nothing."""
    wakes: list[int] = []
    stored = SubmitStore(store, lambda: wakes.append(1), tmp_path, time.time)
    alice, root = _user(store, "alice"), _user(store, "root")
    group = [
        Pending(SubmitRequest(alice, JobSubmit.model_validate(GOOD))),
        Pending(SubmitRequest(alice, JobSubmit.model_validate({**GOOD, "queue": "nope"}))),
        Pending(SubmitRequest(root, JobSubmit.model_validate(GOOD))),
        Pending(SubmitRequest(alice, JobSubmit.model_validate({**GOOD, "queue": "research"}))),
    ]
    stored(group)
    good_a, unknown, good_root, not_member = group
    assert isinstance(unknown.error, Invalid)
    assert unknown.result is None
    assert isinstance(not_member.error, Forbidden)
    assert not_member.result is None
    assert good_a.error is None
    assert good_root.error is None
    ids = {good_a.outcome()[0][0].id, good_root.outcome()[0][0].id}
    assert ids == {"1", "2"}
    with pytest.raises(Invalid):
        unknown.outcome()
    assert _count(store, JobRow) == 2
    assert _count(store, EventRow) == 2  # one "submitted" event per stored job
    assert wakes == [1]


def test_a_group_of_only_refusals_stores_nothing(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    stored = SubmitStore(store, lambda: None, tmp_path, time.time)
    bad = JobSubmit.model_validate({**GOOD, "queue": "nope"})
    group = [Pending(SubmitRequest(_user(store, "alice"), bad))]
    stored(group)
    assert isinstance(group[0].error, Invalid)
    assert _count(store, JobRow) == 0


def _gated(sizes: list[int], gate: threading.Event, fail_first: bool = False) -> GroupCommit:
    """A GroupCommit whose first group waits on ``gate`` (so the others queue behind it)."""

    def store_group(group: Sequence[Pending[int, str]]) -> None:
        sizes.append(len(group))
        if len(sizes) == 1:
            gate.wait(10)
            if fail_first:
                raise RuntimeError("the transaction failed")
        for pending in group:
            if pending.request < 0:
                pending.error = ValueError(f"bad {pending.request}")
            else:
                pending.result = f"stored {pending.request}"

    return GroupCommit(store_group)


def _queued(commit: GroupCommit, gate: threading.Event, requests: list[int]) -> list[object]:
    """Run ``requests[0]`` (it leads and blocks on the gate), then the rest while it waits."""
    outcomes: list[object] = [None] * len(requests)

    def run(i: int) -> None:
        try:
            outcomes[i] = commit.run(requests[i])
        except (ValueError, RuntimeError) as exc:
            outcomes[i] = exc

    with ThreadPoolExecutor(len(requests)) as pool:
        futures = [pool.submit(run, 0)]
        while not commit._leading:  # the first request leads
            time.sleep(0.001)
        futures += [pool.submit(run, i) for i in range(1, len(requests))]
        while len(commit._queue) < len(requests) - 1:  # the others wait behind it
            time.sleep(0.001)
        gate.set()
        for future in futures:
            future.result(10)
    return outcomes


def test_waiting_requests_go_together_and_each_gets_its_own_answer() -> None:
    sizes: list[int] = []
    gate = threading.Event()
    commit = _gated(sizes, gate)
    outcomes = _queued(commit, gate, [0, 1, -2, 3])
    assert sizes == [1, 3]  # the three that waited went in one group
    assert outcomes[:2] == ["stored 0", "stored 1"]
    assert outcomes[3] == "stored 3"
    assert isinstance(outcomes[2], ValueError)  # refused alone
    assert not commit._leading
    assert not commit._queue


def test_a_failed_transaction_fails_its_members_only_and_the_lead_passes_on() -> None:
    sizes: list[int] = []
    gate = threading.Event()
    commit = _gated(sizes, gate, fail_first=True)
    outcomes = _queued(commit, gate, [0, 1, 2])
    assert isinstance(outcomes[0], RuntimeError)  # the first group's transaction failed
    assert outcomes[1:] == ["stored 1", "stored 2"]  # the next group still ran
    assert sizes == [1, 2]


def test_concurrent_submits_through_the_api_one_invalid(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    """Eight clients at once, every other one asking for an unknown queue: each valid one
    is 201 with its own id, each invalid one 422 naming the queue."""
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    client = TestClient(app, headers={"Authorization": f"Bearer {tokens['alice']}"})
    bodies = [GOOD if i % 2 == 0 else {**GOOD, "queue": "nope"} for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda body: client.post("/v1/jobs", json=body), bodies))
    codes = [a.status_code for a in answers]
    assert codes == [201, 422] * 4, [a.text for a in answers]
    ids = sorted(int(a.json()[0]["id"]) for a in answers if a.status_code == 201)
    assert ids == [1, 2, 3, 4]
    assert all("unknown queue 'nope'" in a.json()["detail"] for a in answers[1::2])
    assert _count(store, JobRow) == 4


def test_a_revoked_token_cannot_submit_and_a_bad_token_is_401_whatever_the_body(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    root = TestClient(app, headers={"Authorization": f"Bearer {tokens['root']}"})
    created = root.post("/v1/tokens", json={"user": "alice", "label": "laptop"}).json()
    alice = TestClient(app, headers={"Authorization": f"Bearer {created['token']}"})
    assert alice.post("/v1/jobs", json=GOOD).status_code == 201
    assert root.delete(f"/v1/tokens/{created['id']}").json()["revoked"] is True
    refused = alice.post("/v1/jobs", json=GOOD)
    assert refused.status_code == 401
    assert refused.json()["detail"] == "invalid or revoked token"
    assert alice.post("/v1/jobs/batch", json={"jobs": [GOOD]}).status_code == 401
    assert alice.post("/v1/jobs", json={"gpus": "many"}).status_code == 401
    assert TestClient(app).post("/v1/jobs", json={"gpus": "many"}).status_code == 401


def test_a_changed_unix_account_and_an_expired_token_count_from_the_next_submit(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    """The submit path remembers tokens it has seen (``auth.TokenCache``), yet an admin's change
    to a user holds from the next submit, and a token that expires is refused with its time."""
    now = [1_000_000.0]
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, clock=lambda: now[0])
    root = TestClient(app, headers={"Authorization": f"Bearer {tokens['root']}"})
    created = root.post(
        "/v1/tokens", json={"user": "alice", "label": "laptop", "expires_in_s": 60}
    ).json()
    alice = TestClient(app, headers={"Authorization": f"Bearer {created['token']}"})
    first = alice.post("/v1/jobs", json=GOOD).json()[0]["id"]
    moved = root.patch("/v1/users/alice", json={"unix_user": "nobody"})
    assert moved.status_code == 200, moved.text
    second = alice.post("/v1/jobs", json=GOOD).json()[0]["id"]
    with store.session() as session:
        accounts = {i: u for i, u in session.execute(select(JobRow.id, JobRow.unix_user))}
    assert (accounts[first], accounts[second]) == ("alice", "nobody")
    now[0] += 61
    late = alice.post("/v1/jobs", json=GOOD)
    assert late.status_code == 401
    assert "expired at" in late.json()["detail"]


def test_equal_specs_share_an_admission_only_for_the_same_user(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    """Equal specs in a row are admitted once, per user: root's equal spec after alice's is
    stored as root's, and alice's refused spec is refused for each request that asks it."""
    stored = SubmitStore(store, lambda: None, tmp_path, time.time)
    alice, root = _user(store, "alice"), _user(store, "root")
    spec = JobSubmit.model_validate(GOOD)
    barred = JobSubmit.model_validate({**GOOD, "queue": "research"})
    group = [
        Pending(SubmitRequest(alice, spec)),
        Pending(SubmitRequest(alice, JobSubmit.model_validate(GOOD))),
        Pending(SubmitRequest(root, spec)),
        Pending(SubmitRequest(alice, barred)),
        Pending(SubmitRequest(alice, barred)),
    ]
    stored(group)
    owners = {p.outcome()[0][0].id: p.outcome()[0][0].user_id for p in group[:3]}
    assert owners == {"1": alice.id, "2": alice.id, "3": root.id}
    assert all(isinstance(p.error, Forbidden) for p in group[3:])
    with store.session() as session:
        rows = session.execute(select(JobRow.id, JobRow.user_id).order_by(JobRow.id)).all()
    assert [tuple(r) for r in rows] == [("1", alice.id), ("2", alice.id), ("3", root.id)]
