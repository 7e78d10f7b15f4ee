"""A real `railyard up` process on a free loopback port, for tests that kill it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from railyard.exec.task.launch import free_port as launch_free_port
from tests.waiting import load_factor, scaled


def free_port() -> int:
    """A port below the ephemeral range, so a restart after kill -9 finds it free (an outgoing
    connection of a Ray worker once took a port from bind-to-0 in that gap)."""
    return launch_free_port("127.0.0.1")


def ctrl_c_as_at_a_terminal() -> None:
    """In the server's child: SIGINT as a shell's foreground command gets it. A run started in
    the background (``pytest &``) inherits it ignored, and Ctrl-C tests would then see a
    server that, rightly, ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class ServerProcess:
    """Starts `python -m railyard up` and talks to it over HTTP with the admin token."""

    def __init__(
        self,
        state_dir: Path,
        *,
        gpus: int | None = 4,
        database_url: str | None = None,
        extra: tuple[str, ...] = (),
        cycle_interval_s: float = 0.2,
        port: int | None = None,
        spool_dir: Path | None = None,
        unix_user: str | None = None,
        python: str = sys.executable,
    ) -> None:
        """``unix_user``: run the server as this account (through runuser; the caller is root);
        ``python``: the interpreter it runs with (and runs its jobs' helpers with)."""
        self.state_dir = state_dir
        self.spool_dir = spool_dir or state_dir / "jobs"
        self.unix_user = unix_user
        self.port = port or free_port()
        self.gpus = gpus
        self.database_url = database_url
        self.extra = extra
        self.cycle_interval_s = cycle_interval_s
        self.python = python
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0, *, any_health: bool = False) -> None:
        """Returns once ``/healthz`` answers 200, or answers at all with ``any_health`` (a
        restart amid stranded jobs answers 503 and must still count as up). ``timeout_s`` is
        for an idle machine: it stretches with the load while it waits (`waiting.scaled`)."""
        cmd = [
            self.python,
            "-m",
            "railyard",
            "up",
            *(["--gpus", str(self.gpus)] if self.gpus is not None else []),
            *self.extra,
            "--state-dir",
            str(self.state_dir),
            "--port",
            str(self.port),
            "--cycle-interval",
            str(self.cycle_interval_s),
            "--spool-dir",
            str(self.spool_dir),
        ]
        if self.database_url:
            cmd += ["--database-url", self.database_url]
        if self.unix_user is not None:
            cmd = ["runuser", "-u", self.unix_user, "--", *cmd]
        log = open(self.state_dir / "server.log", "ab")  # noqa: SIM115 - lives with the process
        self.proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RAILYARD_HOME": str(self.state_dir)},
            preexec_fn=ctrl_c_as_at_a_terminal,
        )
        began = time.monotonic()
        while time.monotonic() - began < scaled(timeout_s):
            if self.proc.poll() is not None:
                raise RuntimeError((self.state_dir / "server.log").read_text())
            try:
                status = httpx.get(f"{self.url}/healthz", timeout=1).status_code
                if status == 200 or any_health:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()  # a server that came up too late must not outlive the test that gave up
        log_tail = (self.state_dir / "server.log").read_text()[-2000:]
        waited_s = time.monotonic() - began
        raise RuntimeError(
            f"server did not come up within {waited_s:.0f} s ({timeout_s:.0f} s stretched by "
            f"the load, now {load_factor():.1f}x the cores):\n{log_tail}"
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return str(json.loads((self.state_dir / "client.json").read_text())["token"])

    def request(self, method: str, path: str, *, token: str | None = None, **kw: Any) -> Any:
        response = self.call(method, path, token=token, **kw)
        response.raise_for_status()
        return response.json()

    def call(self, method: str, path: str, *, token: str | None = None, **kw: Any) -> Any:
        """The raw response, as ``token``'s user (the admin by default)."""
        return httpx.request(
            method,
            f"{self.url}{path}",
            timeout=10,
            headers={"Authorization": f"Bearer {token or self.token}"},
            **kw,
        )

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
