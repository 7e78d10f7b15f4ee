"""`railyard logs` reads only what the job's wrapper wrote, as the job's user: the wrapper
records its output files, and the reader refuses anything else (exec/logread.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from railyard.exec.logread import LogRefused, LogSource, read_chunk
from railyard.exec.task.outputs import outputs_record_path
from railyard.exec.task.taskfile import Task


def run_wrapper(tmp_path: Path, task: Task, *command: str) -> subprocess.CompletedProcess[str]:
    """The wrapper of rank 0 with ``task``; its own stdout/stderr are the spool log."""
    task_file = tmp_path / "task.json"
    task.write(task_file)
    exit_file = tmp_path / "rank-0.restart-0.exit.json"
    argv = [sys.executable, "-I", "-m", "railyard.exec.task.wrapper", "--exit-file", str(exit_file),
            "--task-file", str(task_file), "--", *command]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_the_reader_shows_the_file_the_wrapper_wrote_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "job.out"
    task = Task(env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path), stdout=str(out))
    assert run_wrapper(tmp_path, task, "echo", "step 1").returncode == 0
    record = outputs_record_path(tmp_path / "rank-0.restart-0.exit.json")
    source = LogSource(str(out), None, str(record))
    assert read_chunk(source, 0, 1 << 20) == (b"step 1\n", 7)
    assert read_chunk(source, 2, 3) == (b"ep ", 7)  # one bounded read from the offset
    planted = tmp_path / "planted"
    planted.write_text("planted after the job\n")  # made while the job's file still exists
    planted.replace(out)  # same name, not the file the job wrote
    with pytest.raises(LogRefused, match="not a file this job wrote"):
        read_chunk(source, 0, 1 << 20)
    out.unlink()
    out.symlink_to(tmp_path / "task.json")
    with pytest.raises(LogRefused, match="symbolic link"):
        read_chunk(source, 0, 1 << 20)
    out.unlink()
    os.mkfifo(out)
    with pytest.raises(LogRefused, match="not a regular file"):
        read_chunk(source, 0, 1 << 20)


def test_a_path_with_no_record_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("x")
    with pytest.raises(LogRefused, match="no record"):
        read_chunk(LogSource(str(secret), None, None), 0, 10)
    missing = LogSource(str(secret), None, str(tmp_path / "rank-0.restart-0.outputs.json"))
    assert read_chunk(missing, 0, 10) is None  # the wrapper has not opened its output yet


def test_the_spool_log_is_opened_from_the_spool_down_without_symlinks(tmp_path: Path) -> None:
    (tmp_path / "spool" / "1" / "logs").mkdir(parents=True)
    (tmp_path / "spool" / "1" / "logs" / "rank-0.log").write_text("spooled\n")
    spool = str(tmp_path / "spool")
    log = LogSource(f"{spool}/1/logs/rank-0.log", None, None, anchor=spool)
    assert read_chunk(log, 0, 100) == (b"spooled\n", 8)
    (tmp_path / "spool" / "2").symlink_to(tmp_path / "spool" / "1")
    through = LogSource(f"{spool}/2/logs/rank-0.log", None, None, anchor=spool)
    with pytest.raises(LogRefused):
        read_chunk(through, 0, 100)
    with pytest.raises(LogRefused, match="not under"):
        read_chunk(LogSource(f"{spool}/../secret", None, None, anchor=spool), 0, 100)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: reads as another account")
def test_the_reader_opens_with_the_jobs_account(tmp_path: Path) -> None:
    private = tmp_path / "root-only.txt"
    private.write_text("root's\n")
    os.chmod(private, 0o600)
    info = os.stat(private)
    record = tmp_path / "rank-0.restart-0.outputs.json"
    record.write_text(f'{{"files": [[{info.st_dev}, {info.st_ino}]]}}')
    os.chmod(tmp_path, 0o755)
    assert read_chunk(LogSource(str(private), "root", str(record)), 0, 100) == (b"root's\n", 7)
    with pytest.raises(LogRefused, match="Permission denied"):
        read_chunk(LogSource(str(private), "nobody", str(record)), 0, 100)


def test_the_wrapper_names_an_output_file_it_cannot_open(tmp_path: Path) -> None:
    out = tmp_path / "no-such-dir" / "job.out"
    task = Task(env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path), stdout=str(out))
    done = run_wrapper(tmp_path, task, "echo", "never")
    assert done.returncode == 127
    said = done.stdout + done.stderr
    assert f"railyard: error: Could not open stdout file {out}: No such file" in said
    assert "cannot run" not in said
