"""The rank wrapper ends like its command and records how in the exit file."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from railyard.exec.task.exitfile import RankExit, read_exit


def wrap(exit_file: Path, *command: str) -> int:
    argv = [sys.executable, "-m", "railyard.exec.task.wrapper", "--exit-file", str(exit_file), "--"]
    run = subprocess.run([*argv, *command], check=False, timeout=60, start_new_session=True)
    return run.returncode


@pytest.mark.parametrize(
    ("code", "returncode", "record"),
    [
        ("raise SystemExit(7)", 7, RankExit(7, None)),
        ("import os; os.kill(os.getpid(), 15)", -signal.SIGTERM, RankExit(None, "SIGTERM")),
    ],
)
def test_wrapper_mirrors_its_command(
    tmp_path: Path, code: str, returncode: int, record: RankExit
) -> None:
    exit_file = tmp_path / "exit.json"
    assert wrap(exit_file, sys.executable, "-c", code) == returncode
    assert read_exit(exit_file) == record


def test_wrapper_survives_group_signals_to_record_them(tmp_path: Path) -> None:
    exit_file = tmp_path / "exit.json"
    code = "import os, signal; os.killpg(0, signal.SIGUSR1)"  # the whole group, like executors
    assert wrap(exit_file, sys.executable, "-c", code) == -signal.SIGUSR1
    assert read_exit(exit_file) == RankExit(None, "SIGUSR1", ("SIGUSR1",))


def test_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "railyard.exec.task.wrapper", "cmd"],
        capture_output=True,
        check=False,
    )
    assert result.returncode != 0
    assert b"usage" in result.stderr
