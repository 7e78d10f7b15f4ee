"""Failures of the machine, said in one line: a full disk (507 from the API, 503 from
``/healthz`` once the scheduler loop keeps failing, and recovery when space comes back), a
read-only or unusable state directory (``railyard up`` exits 2 with one line).

The full disk is a real one: a small tmpfs mounted for the test (root only; the test skips,
saying so, where mounting is not allowed). SQLite only: PostgreSQL's disk is not ours to
fill here.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from railyard.control.api.app import create_app
from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store, sqlite_url
from railyard.exec.local import LocalExecutor
from tests.control.conftest import Seeder
from tests.integration.server_proc import free_port


def _mount_tmpfs(where: Path, *options: str) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from _mount_tmpfs(tmp_path / "disk", "size=8m")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    yield from _mount_tmpfs(tmp_path / "ro", "ro,size=1m")


def _fill(disk: Path) -> Path:
    """Write until the file system refuses: ENOSPC from here on."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:  # unbuffered: closing has nothing left to flush
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return filler


def test_full_disk_is_507_and_healthz_says_why(small_disk: Path) -> None:
    store = Store(sqlite_url(small_disk / "railyard.db"))
    tokens = Seeder(store).cluster()
    loop = Loop(
        store,
        LocalExecutor("n01", gpus=8),
        # a failed step fails /healthz until a step ends without one
        LoopConfig(state_dir=small_disk, cycle_interval_s=0.05),
    )
    client = TestClient(
        create_app(store, wake=loop.wake, state_dir=small_disk, loop_health=loop.health),
        headers={"Authorization": f"Bearer {tokens['alice']}"},
    )
    stop = threading.Event()
    runner = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    try:
        assert client.get("/healthz").json()["status"] == "ok"
        with store.engine.connect() as connection:  # an empty WAL: every write must grow it
            connection.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        filler = _fill(small_disk)
        batch = {"jobs": [{"command": ["true"], "name": "x" * 200}] * 200}
        response = client.post("/v1/jobs/batch", json=batch)
        assert response.status_code == 507, response.text
        detail = response.json()["detail"]
        assert detail.startswith("store: disk full: database or disk is full")
        assert "\n" not in detail
        # a job that made it in before: the loop cannot record its start, every step fails
        filler.unlink()
        assert client.post("/v1/jobs", json={"command": ["true"]}).status_code == 201
        with store.engine.connect() as connection:
            connection.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        filler = _fill(small_disk)
        runner.start()
        deadline = time.monotonic() + 30
        while client.get("/healthz").status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["status"] == "failing"
        assert health.json()["reason"].startswith("scheduler loop: the last ")
        assert "disk full" in health.json()["reason"]
        filler.unlink()  # space again: the loop recovers, and so does /healthz
        deadline = time.monotonic() + 30
        while client.get("/healthz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.get("/healthz").json()["status"] == "ok"
    finally:
        stop.set()
        loop.wake()
        if runner.is_alive():
            runner.join(timeout=10)
        store.close()


def _up(state_dir: Path) -> subprocess.CompletedProcess[str]:
    # never the default port: a user's own server may hold it
    port = str(free_port())
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "railyard",
            "up",
            "--gpus",
            "1",
            "--state-dir",
            str(state_dir),
            "--port",
            port,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_up_on_a_read_only_state_dir_is_one_line(read_only_dir: Path) -> None:
    result = _up(read_only_dir)
    assert result.returncode == 2
    assert result.stderr == (
        f"railyard: up: state directory {read_only_dir}: Read-only file system "
        "(hint: give a writable directory with --state-dir or RAILYARD_HOME)\n"
    )


def test_up_where_no_directory_can_be_made_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = _up(blocker / "state")
    assert result.returncode == 2
    assert result.stderr.startswith(f"railyard: up: state directory {blocker / 'state'}: ")
    assert result.stderr.count("\n") == 1
