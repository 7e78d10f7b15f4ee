"""A dead terminal ends a `railyard run --pty` job (issue 58, item 6): the client runs on a
real pseudo-terminal that is not its controlling one, as under `su - carol`, which holds SIGHUP
back; the terminal is then closed. All the client learns is that its input ended (EIO), which
it used to ignore for a --pty job, so the client and the job ran on until someone cancelled."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server_proc import ServerProcess
from tests.waiting import wait_for

ENDED = ("completed", "failed", "cancelled", "timeout")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    state = tmp_path_factory.mktemp("dead") / "state"
    state.mkdir()
    proc = ServerProcess(state, gpus=1, extra=("--terminal-linger", "600"))
    proc.start(timeout_s=120)
    yield proc
    proc.stop()


def test_closing_the_terminal_ends_the_pty_job(server: ServerProcess, tmp_path: Path) -> None:
    master, slave = pty.openpty()
    env = {**os.environ, "RAILYARD_URL": server.url, "RAILYARD_TOKEN": server.token,
           "TERM": "xterm"}  # fmt: skip
    client = subprocess.Popen(
        [sys.executable, "-m", "railyard", "run", "--pty", "-J", "dead-tty", "--", "sleep", "600"],
        stdin=slave, stdout=slave, stderr=slave, env=env, cwd=tmp_path,
        start_new_session=True,  # not the terminal's session: no SIGHUP reaches it
    )  # fmt: skip
    os.close(slave)
    jobs: list[dict[str, str]] = []

    def running() -> bool:
        jobs[:] = [j for j in server.request("GET", "/v1/jobs") if j["name"] == "dead-tty"]
        return any(j["state"] == "running" for j in jobs)

    try:
        wait_for(running, 120)
        job_id = jobs[0]["id"]
        os.close(master)  # the terminal is gone; the linger (600 s) cannot be what ends it
        master = -1
        wait_for(lambda: server.request("GET", f"/v1/jobs/{job_id}")["state"] in ENDED, 120)
        assert client.wait(60) != 0
    finally:
        if master >= 0:
            os.close(master)
        if client.poll() is None:
            client.kill()
            client.wait()
