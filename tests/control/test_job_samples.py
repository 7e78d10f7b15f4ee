"""Per-job resource history, on both stores: the sampler's rows for this node's running jobs
(GPU figures as NVML reports them, host CPU from cumulative CPU time), pruning after the
retention window, buckets against a hand count, ``GET /v1/jobs/{id}/samples`` (JSON and CSV,
another user's job not found) and the job page's graphs and CSV.

NVML cannot run here (no GPU): the GPU readings are :class:`GpuReading` values as
:func:`railyard.probe.read_gpus` returns them; process usage is given the same way
(`tests/exec/test_usage.py` measures real processes)."""

from __future__ import annotations

import csv
import io
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from tests.control.conftest import FLAVOR
from tests.control.test_dashboard import app_for, login

from railyard.control.api.app import create_app
from railyard.control.metrics import sampler as sampler_module
from railyard.control.metrics.sampler import (
    PRUNE_BATCH,
    Running,
    Sampler,
    SamplerConfig,
    job_sampler,
    local_reader,
)
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, SampleRow, User
from railyard.control.usecases import jobsamples
from railyard.control.usecases.jobsamples import history
from railyard.exec.usage import NodeReading, Placements, ProcessUsage
from railyard.probe import GpuReading

pytestmark = pytest.mark.stores

MIB = 2**20


class Clock:
    def __init__(self, t_s: float) -> None:
        self.t_s = t_s

    def __call__(self) -> float:
        return self.t_s


def _job(store: Store, job_id: str, user: str, state: str, placement: dict[str, list[int]]) -> None:
    with store.session() as session:
        owner = session.scalars(select(User).where(User.name == user)).one()
        session.add(JobRow(id=job_id, number=int(job_id), user_id=owner.id, queue="default",
                           command=["train"], flavor=FLAVOR, workers=1,
                           gpus_per_worker=len(next(iter(placement.values()), [])), state=state,
                           placement=placement, restart_count=1, submit_t_s=0.0,
                           updated_t_s=0.0))  # fmt: skip


@pytest.fixture
def jobs(store: Store, tokens: dict[str, str]) -> dict[str, str]:
    """alice's job 1 runs on GPUs 2 and 3 of n01; bob's job 2 on n02; job 3 is pending."""
    _job(store, "1", "alice", "running", {"n01": [2, 3]})
    _job(store, "2", "bob", "running", {"n02": [0]})
    _job(store, "3", "alice", "pending", {})
    return tokens


def readings(util: float = 50.0) -> list[GpuReading]:
    return [
        GpuReading(index=i, uuid=f"GPU-{i}", name="NVIDIA H100 80GB HBM3", util_pct=util + i,
                   fb_used_mib=1000.0 * (i + 1), power_w=300.0 + i, temp_c=40.0 + i)
        for i in range(4)
    ]  # fmt: skip


class Usage:
    """What job 1's processes have used so far (bob's job runs elsewhere: never asked)."""

    def __init__(self) -> None:
        self.cpu_s, self.rss_bytes, self.processes = 0.0, 512 * MIB, 3
        self.asked: list[str] = []

    def __call__(self, job_id: str) -> ProcessUsage | None:
        self.asked.append(job_id)
        return ProcessUsage(self.cpu_s, self.rss_bytes, self.processes)


def _rows(store: Store) -> list[SampleRow]:
    with store.session() as session:
        found = session.scalars(select(SampleRow)).all()
        session.expunge_all()
    return sorted(found, key=lambda r: (r.t_s, -1 if r.gpu is None else r.gpu))  # host first


def test_a_tick_reads_this_nodes_running_jobs_gpus_and_processes(
    store: Store, jobs: dict[str, str]
) -> None:
    clock, usage = Clock(1000.0), Usage()
    sampler = Sampler(
        store, local_reader("n01", readings, usage), SamplerConfig(interval_s=10), clock
    )
    assert sampler.tick() == 3  # GPUs 2 and 3, and the host's processes
    rows = _rows(store)
    assert usage.asked == ["1"]
    assert [(r.job_id, r.attempt, r.node, r.gpu) for r in rows] == [
        ("1", 1, "n01", None), ("1", 1, "n01", 2), ("1", 1, "n01", 3)]  # fmt: skip
    host, gpu2, gpu3 = rows
    assert (gpu2.gpu_util_pct, gpu2.gpu_mem_used_bytes, gpu2.gpu_power_w, gpu2.gpu_temp_c) == (
        52.0, 3000.0 * MIB, 302.0, 42.0)  # fmt: skip
    assert gpu3.gpu_mem_used_bytes == 4000.0 * MIB
    assert host.cpu_pct is None  # a rate needs two readings
    assert host.host_mem_bytes == 512 * MIB
    clock.t_s, usage.cpu_s = 1010.0, 15.0  # 1.5 cores busy over those 10 s
    sampler.tick()
    assert [r.cpu_pct for r in _rows(store) if r.gpu is None] == [None, 150.0]
    usage.processes = 0  # its processes ended; the loop has not noticed yet
    clock.t_s = 1020.0
    assert sampler.tick() == 2  # its GPUs still, no false zero for its memory


class Nodes:
    """An executor whose nodes read themselves (Ray's agents; `tests/multinode` runs the real
    one): job 2 answers from n02 only, as the placement says."""

    def __init__(self) -> None:
        self.asked: list[Placements] = []

    def read_jobs(self, placements: Placements) -> dict[str, list[NodeReading]]:
        self.asked.append(placements)
        usage = ProcessUsage(cpu_s=1.0, rss_bytes=64 * MIB, processes=2)
        return {"2": [NodeReading("n02", usage, tuple(readings()))]}


def test_a_backends_nodes_read_their_own_share(store: Store, jobs: dict[str, str]) -> None:
    nodes = Nodes()
    sampler = job_sampler(store, None, nodes, readings, SamplerConfig(interval_s=10))
    assert sampler is not None
    assert sampler.tick() == 2  # bob's GPU 0 on n02 and his processes there
    assert nodes.asked == [{"1": {"n01": (2, 3)}, "2": {"n02": (0,)}}]
    assert [(r.job_id, r.node, r.gpu) for r in _rows(store)] == [("2", "n02", None),
                                                                 ("2", "n02", 0)]  # fmt: skip
    assert job_sampler(store, None, object(), readings, SamplerConfig()) is None  # no machine
    assert job_sampler(store, None, nodes, readings, SamplerConfig(interval_s=0)) is None


def test_rows_older_than_the_retention_are_pruned(
    store: Store, jobs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(1000.0)
    config = SamplerConfig(interval_s=10, retention_s=100)
    sampler = Sampler(store, local_reader("n01", readings, Usage()), config, clock)
    sampler.tick()
    clock.t_s = 1050.0
    sampler.tick()
    assert {r.t_s for r in _rows(store)} == {1000.0, 1050.0}  # within the retention
    clock.t_s = 1150.0
    sampler.tick()
    assert {r.t_s for r in _rows(store)} == {1050.0, 1150.0}
    monkeypatch.setattr(sampler_module, "PRUNE_BATCH", 2)  # a batch at most a tick
    clock.t_s = 1400.0
    sampler.tick()
    assert len([r for r in _rows(store) if r.t_s < 1300.0]) == 6 - 2
    assert PRUNE_BATCH >= 2_304  # a tick of 2,048 GPUs on 256 nodes: the pruning keeps up


@pytest.fixture
def sampled(store: Store, jobs: dict[str, str]) -> list[float]:
    """60 ticks, 10 s apart from t=0: job 1's GPU 2 utilisation is the tick's number."""
    clock, usage = Clock(0.0), Usage()
    reader = local_reader("n01", lambda: readings(float(clock.t_s / 10)), usage)
    sampler = Sampler(store, reader, SamplerConfig(interval_s=10), clock)
    times = []
    for i in range(60):
        clock.t_s, usage.cpu_s = 10.0 * i, 5.0 * i  # half a core busy
        sampler.tick()
        times.append(clock.t_s)
    return times


def test_buckets_are_means_of_the_readings_in_them(store: Store, sampled: list[float]) -> None:
    with store.session() as session:
        found = history(session, "1", points=6)
    width = 99.0  # ceil(590 s / 6)
    assert (found.bucket_s, found.readings) == (width, 60)
    expected: dict[int, list[float]] = {}
    for t in sampled:
        expected.setdefault(int(t // width), []).append(t / 10 + 2)  # GPU 2's utilisation
    assert [b.t_s for b in found.buckets] == [k * width for k in sorted(expected)]
    for b, (_, utils) in zip(found.buckets, sorted(expected.items()), strict=True):
        assert b.gpus["n01:2"] == pytest.approx(sum(utils) / len(utils))
        assert b.gpus["n01:3"] == pytest.approx(sum(utils) / len(utils) + 1)
        assert b.gpu_util_pct == pytest.approx(sum(utils) / len(utils) + 0.5)  # mean of 2
        assert b.gpu_mem_used_bytes == 7000.0 * MIB  # summed over the job's GPUs
        assert b.gpu_power_w == 605.0
        assert b.gpu_temp_c_max == 43.0
        assert b.host_mem_bytes == 512 * MIB
    assert found.buckets[-1].cpu_pct == pytest.approx(50.0)
    with store.session() as session:
        assert history(session, "1", points=1000).bucket_s == 1.0  # never under a second
        assert history(session, "2").buckets == []
        late = history(session, "1", points=300, since_t_s=500.0)
        recent = history(session, "1", points=300, last_s=100.0)  # a page's window
    assert late.buckets[0].t_s == 500.0
    assert (recent.buckets[0].t_s, recent.readings, len(recent.buckets)) == (490.0, 11, 11)


def _client(store: Store, tmp_path: Path, token: str) -> TestClient:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    return TestClient(app, headers={"Authorization": f"Bearer {token}"})


def test_the_api_serves_the_owner_and_admins_json_and_csv(
    store: Store, sampled: list[float], jobs: dict[str, str], tmp_path: Path
) -> None:
    alice = _client(store, tmp_path, jobs["alice"])
    body = alice.get("/v1/jobs/1/samples", params={"points": 6}).json()
    assert (body["job_id"], body["bucket_s"], body["readings"]) == ("1", 99.0, 60)
    assert body["gpus"] == ["n01:2", "n01:3"]
    assert len(body["points"]) == 6
    assert body["points"][0]["gpu_mem_used_bytes"] == 7000.0 * MIB
    text = alice.get("/v1/jobs/1/samples", params={"points": 6, "format": "csv"})
    assert text.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(text.text)))
    assert len(rows) == 6
    assert float(rows[0]["gpu_util_pct[n01:2]"]) == body["points"][0]["gpus"]["n01:2"]
    assert rows[0]["gpu_power_w"] == "605"
    root = _client(store, tmp_path, jobs["root"])
    assert root.get("/v1/jobs/1/samples").status_code == 200
    bob = _client(store, tmp_path, jobs["bob"])
    refused = bob.get("/v1/jobs/1/samples")
    assert refused.status_code == 404  # another user's job is not found: ids don't leak
    assert "points" not in refused.text
    for bad in ({"points": 0}, {"points": 10_001}, {"format": "xml"}, {"since_t_s": -1}):
        answer = alice.get("/v1/jobs/1/samples", params=bad)
        assert answer.status_code == 422, (bad, answer.text)


def test_the_job_page_draws_the_history_and_offers_it_as_csv(
    store: Store, sampled: list[float], jobs: dict[str, str], tmp_path: Path
) -> None:
    client = login(app_for(store, tmp_path), jobs["alice"])
    page = client.get("/ui/jobs/1").text
    assert "<h2>Resources</h2>" in page
    for label in ("GPU utilisation (mean of its GPUs)", "GPU memory used (its GPUs)",
                  "GPU power (its GPUs)", "CPU (100% = one core)"):  # fmt: skip
        assert f'aria-label="{label}"' in page, label
    assert "GPU power (its GPUs): last 605 W" in page
    assert "60 readings." in page  # one bucket each: 60 fit in the graph's 120
    assert 'href="/ui/jobs/1/samples.csv"' in page
    download = client.get("/ui/jobs/1/samples.csv")
    assert download.headers["content-disposition"] == 'attachment; filename="job-1-samples.csv"'
    assert len(download.text.splitlines()) == 1 + 60  # a bucket per reading
    pending = client.get("/ui/jobs/3").text
    assert "No readings yet" in pending
    other = login(app_for(store, tmp_path), jobs["bob"])
    assert other.get("/ui/jobs/1/samples.csv").status_code == 404


def test_a_failing_tick_is_logged_and_the_next_one_samples(
    store: Store, jobs: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    local = local_reader("n01", readings, Usage())
    calls: list[int] = []

    def flaky(running: Sequence[Running]) -> Mapping[str, Sequence[NodeReading]]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a reader's bug")
        return local(running)

    stop = threading.Event()
    thread = Sampler(store, flaky, SamplerConfig(interval_s=0.05)).start(stop)
    try:
        deadline = time.monotonic() + 30
        while not _rows(store):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert "railyard sampler: tick failed" in caplog.text
    assert "a reader's bug" in caplog.text


def test_one_request_reads_a_bounded_number_of_rows(
    store: Store, sampled: list[float], jobs: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """60 readings of 3 rows each kept; a budget of 30 rows: the newest 10 readings, or the
    10 from ``since_t_s`` on, and the answer says it is partial."""
    monkeypatch.setattr(jobsamples, "ROW_BUDGET", 30)
    with store.session() as session:
        newest = history(session, "1")
        oldest = history(session, "1", since_t_s=0.0)
        whole = history(session, "1", since_t_s=500.0)  # 10 readings fit
    assert (newest.partial, newest.readings) == (True, 10)
    assert [b.t_s for b in newest.buckets] == [500.0 + 10 * i for i in range(10)]
    assert (oldest.partial, oldest.readings) == (True, 10)
    assert [b.t_s for b in oldest.buckets] == [10.0 * i for i in range(10)]
    assert (whole.partial, whole.readings) == (False, 10)
    body = _client(store, tmp_path, jobs["alice"]).get("/v1/jobs/1/samples").json()
    assert (body["partial"], body["readings"]) == (True, 10)


def test_a_busy_store_delays_a_ticks_write_and_loses_no_reading(
    store: Store, jobs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 55: the sampler lost readings to "database is locked" during batch submits; a
    transient failure of the write is tried again with the same rows (here injected once)."""
    sampler = Sampler(store, local_reader("n01", readings, Usage()), SamplerConfig(interval_s=10))
    real_write, failed = sampler._write, []

    def busy_once(rows: list[dict[str, object]], t_s: float) -> None:
        if not failed:
            failed.append(len(rows))
            locked = Exception("database is locked")
            raise OperationalError("INSERT INTO job_samples", {}, locked)
        real_write(rows, t_s)

    monkeypatch.setattr(sampler_module, "WRITE_BACKOFF_S", 0.0)
    monkeypatch.setattr(sampler, "_write", busy_once)
    written = sampler.tick()
    assert written > 0
    assert failed == [written]
    assert len(_rows(store)) == written
