"""A batch of alike jobs (control/usecases/jobs.py ``store_admitted``): one row is sent and
the store copies it for the rest, as for an array's tasks; the rows and the answer must be
what one row per job would have given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import EventRow, JobRow
from railyard.control.usecases.jobs import ALIKE_COPY_MIN

pytestmark = pytest.mark.stores  # the copy is written per database

JOB = {"script": "#!/bin/sh\necho hi\n", "gpus": 2, "env": {"A": "1"}, "name": "same"}
OWN = {"id", "number", "task_number", "command", "name", "change_seq"}  # a script job's command
# names its id; the store numbers each row's write (`store.jobchanges`)


def _rows(store: Store) -> dict[str, dict[str, Any]]:
    with store.session() as session:
        rows = session.execute(select(JobRow.__table__)).mappings().all()
    return {r["id"]: dict(r) for r in rows}


def test_a_batch_of_alike_jobs_stores_and_answers_as_one_row_each(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, clock=lambda: 1_000.0)
    alice = TestClient(app, headers={"Authorization": f"Bearer {tokens['alice']}"})
    count = ALIKE_COPY_MIN + 4
    alike = alice.post("/v1/jobs/batch", json={"jobs": [JOB] * count})
    assert alike.status_code == 201, alike.text
    # the same jobs told apart by name: one row each through the driver
    apart = [{**JOB, "name": f"n{i}"} for i in range(count)]
    apart_answer = alice.post("/v1/jobs/batch", json={"jobs": apart})
    assert apart_answer.status_code == 201
    rows = _rows(store)
    assert len(rows) == 2 * count
    for i in range(1, count + 1):
        copied, sent = rows[str(i)], rows[str(i + count)]
        assert (copied["number"], copied["task_number"]) == (i, i)
        assert copied["command"][0].endswith(f"/{i}/script.sh")  # its own, not the first one
        assert copied["array_parent"] is None
        assert {k: v for k, v in copied.items() if k not in OWN} == {
            k: v for k, v in sent.items() if k not in OWN
        }
    answered = alike.json()
    assert [a["id"] for a in answered] == [str(i) for i in range(1, count + 1)]
    # records copied from the first (known alike by their shared stored row) are whole: the
    # same as those built one per job, but for what each job has of its own
    for copied, built in zip(answered, apart_answer.json(), strict=True):
        assert {k: v for k, v in copied.items() if k not in OWN} == {
            k: v for k, v in built.items() if k not in OWN
        }
    for record in answered:  # each record is the job's own, as GET shows it
        shown = alice.get(f"/v1/jobs/{record['id']}").json()
        assert record["command"] == shown["command"]
        assert record["task_number"] == shown["task_number"]
        assert {k: record[k] for k in ("gpus", "name", "queue", "env_vars", "state")} == {
            k: shown[k] for k in ("gpus", "name", "queue", "env_vars", "state")
        }
    with store.session() as session:
        events = session.scalars(select(EventRow.job_id).where(EventRow.kind == "submitted"))
        assert sorted(events, key=int) == [str(i) for i in range(1, 2 * count + 1)]
