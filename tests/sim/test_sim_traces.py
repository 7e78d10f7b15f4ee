"""Trace loaders read fixtures written from the published schemas; bad rows say where."""

from __future__ import annotations

from pathlib import Path

import pytest

from railyard.sim.traces import TraceError, load_trace
from railyard.sim.workload import FinalState

FIXTURES = Path(__file__).parent / "fixtures"


def test_helios_jobs_states_and_skips() -> None:
    w = load_trace(FIXTURES / "helios_cluster_log.csv", "helios")
    got = {j.id: (j.submit_s, j.gpus, j.runtime_s, j.queue, j.user, j.state) for j in w.jobs}
    assert got == {
        "h1": (0.0, 8, 3600.0, "vcA", "u1", FinalState.COMPLETED),
        "h2": (300.0, 1, 600.0, "vcB", "u2", FinalState.FAILED),
        "h3": (600.0, 16, 7200.0, "vcA", "u1", FinalState.CANCELLED),
        "h6": (1200.0, 4, 600.0, "vcA", "u2", FinalState.FAILED),  # TIMEOUT; from start/end
    }
    assert w.skipped == {"no GPU": 1, "not finished": 1}


def test_philly_runtime_spans_all_attempts() -> None:
    w = load_trace(FIXTURES / "philly_cluster_job_log.json", "philly")
    got = {j.id: (j.submit_s, j.gpus, j.runtime_s, j.queue, j.state) for j in w.jobs}
    assert got == {
        # first attempt start 00:01 to last attempt end 01:00
        "application_1_0001": (0.0, 2, 3540.0, "vc1", FinalState.COMPLETED),
        "application_1_0002": (600.0, 16, 600.0, "vc2", FinalState.CANCELLED),
    }
    assert w.skipped == {"never ran": 1, "not finished": 1}


def test_pai_sums_fractional_gpus_over_tasks() -> None:
    w = load_trace(FIXTURES / "pai", "pai")
    got = {j.id: (j.submit_s, j.gpus, j.runtime_s, j.state) for j in w.jobs}
    assert got == {
        "6b3c1f0a": (0.0, 2, 3590.0, FinalState.COMPLETED),  # 2 x 100%; ps has no GPU
        "7c4d2e1b": (500.0, 1, 500.0, FinalState.FAILED),  # half a GPU takes a whole one
        "9e6f4a3d": (1000.0, 1, 600.0, FinalState.COMPLETED),  # 4 x 25%
    }
    assert w.skipped == {"not finished": 1}


def test_railyard_csv_round_trip() -> None:
    w = load_trace(FIXTURES / "railyard_trace.csv", "railyard")
    c = next(j for j in w.jobs if j.id == "c")
    assert (c.gpus, c.runtime_s, c.queue, c.user, c.walltime_s, c.preemptible) == (
        8, 200.0, "prod", "cat", 200.0, True,
    )  # fmt: skip
    assert [j.id for j in w.jobs] == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("fmt", "text", "where"),
    [
        (
            "railyard",
            "id,submit_s,gpus,runtime_s\na,0,8,100\nb,1,eight,50\n",
            ":3: gpus: not a number",
        ),
        ("railyard", "id,submit_s,gpus\na,0,8\n", ":1: runtime_s: missing column"),
        ("railyard", "id,submit_s,gpus,runtime_s\na,0,8,100\na,1,8,5\n", ":3: id: duplicate"),
        ("railyard", "id,submit_s,gpus,runtime_s\na,0,0,100\n", ":2: gpus: must be a whole"),
        ("railyard", "id,submit_s,gpus,runtime_s\na,0,8,-5\n", ":2: runtime_s: must be a finite"),
        ("railyard", "id,submit_s,gpus,runtime_s\na,0,8\n", ":2: row: 3 fields"),
        (
            "railyard",
            "id,submit_s,gpus,runtime_s,deadline_s\na,50,8,100,40\n",
            ":2: deadline_s: must be after submit_s",
        ),
        (
            "helios",
            "job_id,gpu_num,state,submit_time,duration\nx,1,COMPLETED,yesterday,5\n",
            ":2: submit_time: not a time",
        ),
    ],
)
def test_malformed_rows_name_file_line_and_field(
    tmp_path: Path, fmt: str, text: str, where: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as info:
        load_trace(path, fmt)
    message = str(info.value)
    assert message.startswith(str(path) + where), message
    assert "(hint: " in message
    assert "\n" not in message


def test_philly_bad_detail_points_at_the_job_line(tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    path.write_text(
        '[\n{"jobid": "j1", "status": "Pass", "submitted_time": "2017-10-03 00:00:00",\n'
        ' "attempts": [{"start_time": "2017-10-03 00:00:00", "end_time": "2017-10-03 00:01:00",'
        ' "detail": [{"ip": "m1"}]}]}\n]\n'
    )
    with pytest.raises(TraceError, match=r"log\.json:2: detail: job j1: bad detail"):
        load_trace(path, "philly")


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "nope.csv", "railyard")
    with pytest.raises(TraceError, match="unknown format"):
        load_trace(FIXTURES / "railyard_trace.csv", "slurm")
