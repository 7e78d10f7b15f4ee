"""No raw Python value on a job's page, and counts that mean what they say (both stores;
issue 60, items 5 and 6): a start event stored as ``Fits on {'vm': [2, 3]}`` reads
``Fits on vm:2-3``; a command with a newline is shown shell-quoted; a pending job behind
others submitted at the same instant (an array's tasks, a script's loop) says how many."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update
from tests.control.test_dashboard import app_for, login, submit

from railyard.control.store.database import Store
from railyard.control.store.effects import record
from railyard.control.store.tables import JobRow
from railyard.control.usecases.placements import readable

pytestmark = pytest.mark.stores


def test_a_start_event_reads_as_words(store: Store, tmp_path: Path,
                                      tokens: dict[str, str]) -> None:  # fmt: skip
    job = submit(store, "alice", command=["python", "-c", "import os\nprint(1)"])
    with store.session() as session:
        record(session, 1.0, "start", "Fits on {'vm': [2, 3], 'n02': [0, 1, 2, 3, 7]}", job)
    page = login(app_for(store, tmp_path), tokens["alice"]).get(f"/ui/jobs/{job}").text
    assert "Fits on n02:0-3,7 vm:2-3" in page
    assert "{&#x27;vm&#x27;" not in page
    assert "<code>python -c $&#x27;import os\\nprint(1)&#x27;</code>" in page


def test_readable_leaves_other_braces() -> None:
    assert readable("x {not python} {'a': 'b'}") == "x {not python} {'a': 'b'}"


def test_jobs_ahead_counts_the_same_instant(store: Store, tmp_path: Path,
                                            tokens: dict[str, str]) -> None:  # fmt: skip
    jobs = [submit(store, "alice", gpus=8) for _ in range(4)]
    with store.session() as session:  # one instant, as an array's tasks or a loop of sbatch
        session.execute(update(JobRow).values(reason="Priority", submit_t_s=1000.0))
    page = login(app_for(store, tmp_path), tokens["alice"]).get(f"/ui/jobs/{jobs[-1]}").text
    panel = page.split("<h2>Why it waits</h2>", 1)[1].split("</table>", 1)[0]
    assert "3 pending job(s) of its queue, 3 of its flavor in all queues" in panel
