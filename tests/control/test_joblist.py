"""The dashboard's jobs list on both stores: arrays' pending tasks folded as squeue shows them,
pages that tile the whole list in every sort, search by id, name, user and command, and a user
who sees only their own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from tests.control.test_dashboard import app_for, login, submit

from railyard.control.errors import Invalid
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases import joblist, jobs
from railyard.control.usecases.joblist import SORTS, job_page

pytestmark = pytest.mark.stores


@pytest.fixture
def seeded(store: Store, tokens: dict[str, str]) -> dict[str, str]:
    """alice: three jobs (one named resnet running train.py at priority 900), then an array
    0-9%2 whose tasks 0 and 1 run; bob: two jobs."""
    ids = {
        "plain": submit(store, "alice", name="plain"),
        "resnet": submit(store, "alice", name="resnet", command=["python", "train.py"]),
        "wide": submit(store, "alice", name="wide", gpus=8),
    }
    with store.session() as session:
        tasks = session.query(JobRow).count()
        session.execute(update(JobRow).where(JobRow.id == ids["resnet"]).values(priority=900))
    with store.session() as session:
        alice = session.query(User).filter_by(name="alice").one()
        spec = JobSubmit.model_validate({"command": ["true"], "gpus": 1, "name": "sweep",
                                         "array": "0-9%2"})  # fmt: skip
        rows = jobs.submit(session, alice, spec, time.time(), spool_dir=Path("/nonexistent"))
        ids["array"] = rows[0].id.split("_")[0]
    with store.session() as session:
        session.execute(update(JobRow).where(JobRow.array_parent == ids["array"],
                                             JobRow.array_index < 2)
                        .values(state="running", start_t_s=JobRow.submit_t_s + 5))  # fmt: skip
    ids["bob1"] = submit(store, "bob", name="bobs")
    ids["bob2"] = submit(store, "bob", name="bobs-too")
    assert tasks == 3
    return ids


def _page(store: Store, who: str, **kw: object) -> tuple[list[str], int]:
    with store.session() as session:
        actor = session.query(User).filter_by(name=who).one()
        found = job_page(session, actor, **kw)  # type: ignore[arg-type]
        return [line.id for line in found.lines], found.total


def test_pending_array_tasks_fold_into_one_line(store: Store, seeded: dict[str, str]) -> None:
    ids, total = _page(store, "root")
    a = seeded["array"]
    assert ids == [seeded["bob2"], seeded["bob1"], f"{a}_[2-9%2]", f"{a}_1", f"{a}_0",
                   seeded["wide"], seeded["resnet"], seeded["plain"]]  # fmt: skip
    assert total == 8
    with store.session() as session:
        root = session.query(User).filter_by(name="root").one()
        [folded] = [line for line in job_page(session, root).lines if line.tasks > 1]
    assert (folded.tasks, folded.state, folded.href) == (8, "pending", f"/ui/jobs?array={a}")
    unfolded, count = _page(store, "root", array=a)
    assert count == 10
    assert unfolded[:3] == [f"{a}_9", f"{a}_8", f"{a}_7"]


@pytest.mark.parametrize("sort", list(SORTS))
def test_pages_tile_the_list_in_every_sort(store: Store, seeded: dict[str, str], sort: str) -> None:
    whole, total = _page(store, "root", sort=sort, limit=100)
    pages = [_page(store, "root", sort=sort, offset=o, limit=3)[0] for o in range(0, total, 3)]
    assert [i for p in pages for i in p] == whole
    assert len(set(whole)) == total == 8
    if sort == "priority":
        assert whole[0] == seeded["resnet"]
    if sort == "gpus":
        assert whole[0] == seeded["wide"]
    if sort == "oldest":
        assert whole[0] == seeded["plain"]


def test_search_by_id_name_user_and_command(store: Store, seeded: dict[str, str]) -> None:
    assert _page(store, "root", search="resnet")[0] == [seeded["resnet"]]
    assert _page(store, "root", search="train.py")[0] == [seeded["resnet"]]
    assert set(_page(store, "root", search="bob")[0]) == {seeded["bob1"], seeded["bob2"]}
    assert _page(store, "root", search=seeded["wide"])[0] == [seeded["wide"]]
    assert _page(store, "root", search="%")[0] == []  # a wildcard is a plain character
    assert _page(store, "root", search="_")[0] == []


def test_a_user_sees_only_their_own(store: Store, seeded: dict[str, str]) -> None:
    ids, total = _page(store, "alice")
    assert total == 6
    assert not {seeded["bob1"], seeded["bob2"]} & set(ids)
    assert _page(store, "alice", search="bob") == ([], 0)
    assert _page(store, "alice", user="bob")[1] == 6  # not an admin: the filter is ignored


def test_bad_sort_and_state_are_refused(store: Store, seeded: dict[str, str]) -> None:
    with pytest.raises(Invalid, match="sort"):
        _page(store, "root", sort="size")
    with pytest.raises(Invalid, match="state"):
        _page(store, "root", state="sleeping")


def test_the_jobs_page_searches_sorts_and_pages(
    store: Store, seeded: dict[str, str], tokens: dict[str, str], tmp_path: Path
) -> None:
    client: TestClient = login(app_for(store, tmp_path), tokens["root"])
    found = client.get("/ui/jobs", params={"q": "resnet"}).text
    assert "1-1 of 1" in found
    assert f'href="/ui/jobs/{seeded["resnet"]}"' in found
    first = client.get("/ui/jobs", params={"sort": "oldest"}).text
    assert "1-8 of 8" in first
    assert first.index(f">{seeded['plain']}<") < first.index(f">{seeded['wide']}<")
    assert f'{seeded["array"]}_[2-9%2]</a> <span class="muted">(8 tasks)' in first
    past = client.get("/ui/jobs", params={"offset": "99999999999"}).text
    assert "none here: 8 in all" in past
    assert 'href="/ui/jobs?offset=0">first</a>' in past
    bad = client.get("/ui/jobs", params={"sort": "size"})
    assert bad.status_code == 422
    assert "unknown sort" in bad.text


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_pages_tile_with_many_folded_arrays(store: Store, tokens: dict[str, str],
                                            limit: int) -> None:  # fmt: skip
    """Arrays and single jobs interleaved (priorities mixed): every page size and sort gives
    the one list, each line once."""
    with store.session() as session:
        users = {u.name: u for u in session.query(User)}
        for n in range(9):
            body: dict[str, object] = {"command": ["true"], "gpus": 1 + n % 3}
            if n % 3 == 0:
                body["array"] = f"0-{n + 1}"
            who = users["alice" if n % 2 else "bob"]
            jobs.submit(session, who, JobSubmit.model_validate(body), time.time() + n,
                        spool_dir=Path("/nonexistent"))  # fmt: skip
        session.execute(update(JobRow).where(JobRow.number % 2 == 0).values(priority=700))
    for sort in SORTS:
        whole, total = _page(store, "root", sort=sort, limit=100)
        assert total == len(whole) == 9
        pages = [_page(store, "root", sort=sort, offset=o, limit=limit)[0]
                 for o in range(0, total + limit, limit)]  # fmt: skip
        assert [i for p in pages for i in p] == whole, sort


@pytest.mark.parametrize("sort", list(SORTS))
def test_a_search_reads_the_same_pages_sparse_or_dense(
    store: Store, seeded: dict[str, str], sort: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search matching few jobs is read in one scan and ordered here; one matching many by
    the store's ordered window: every page of each is the same list."""
    pages = {}
    for sparse in (joblist.SPARSE, 0):  # 0: every search counts as dense
        monkeypatch.setattr(joblist, "SPARSE", sparse)
        whole, total = _page(store, "root", sort=sort, search="s", limit=100)
        tiles = [_page(store, "root", sort=sort, search="s", offset=o, limit=2)
                 for o in range(0, total + 2, 2)]  # fmt: skip
        assert [i for ids, _ in tiles for i in ids] == whole
        assert {t for _, t in tiles} == {total}
        pages[sparse] = (whole, total)
    assert pages[joblist.SPARSE] == pages[0]
    assert pages[0][1] >= 5  # bob's, the array's ("sweep") and their users' ("bobs")
