"""Signals and a batch script's shell as under Slurm 22.05 (issue 57 item 6): the shell does
not start with the warning signal ignored (bash cannot trap a signal ignored on entry), a
signal without ``B:``/``--batch`` reaches the steps' tasks and not the shell, and ``scancel
--signal=USR1 --batch`` (``B:SIGUSR1`` here) the shell alone (real processes)."""

from __future__ import annotations

import sys
from pathlib import Path

from exec_helpers import MakeExecutor, logs, spec, wait_for, wait_report

from railyard.exec import LaunchSpec

CHILD = (
    "import os, signal, sys, time; d = sys.argv[1]; "
    "signal.signal(signal.SIGUSR1, lambda *_: (print('task got USR1', flush=True), sys.exit(0)));"
    " open(os.path.join(d, 'ready'), 'w').close(); time.sleep(3); print('child done', flush=True)"
)


def _batch(tmp_path: Path, body: str) -> LaunchSpec:
    script_path = tmp_path / "job" / "script.sh"
    return spec(tmp_path, (str(script_path),), batch=True, script="#!/bin/bash\n" + body,
                script_path=script_path, steps_dir=tmp_path / "job" / "steps", workers=1,
                gpus_per_worker=1, gpus=(0,), job_env={"SLURM_JOB_ID": "42"})  # fmt: skip


def _signalled(make_executor: MakeExecutor, tmp_path: Path, body: str, signal: str) -> str:
    """The log of a batch script run until its task is ready, then sent ``signal``."""
    executor = make_executor(gpus=1)
    executor.start(_batch(tmp_path, body))
    wait_for(lambda: (tmp_path / "ready").exists())
    executor.signal("job", signal)
    wait_report(executor, "job")
    return logs(tmp_path)


def test_scancel_batch_reaches_a_trap_in_the_shell_alone(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    body = (
        "trap 'echo shell got USR1' USR1\n"
        f'{sys.executable} -c "{CHILD}" {tmp_path} &\n'
        "wait; wait\necho shell exits\n"
    )
    text = _signalled(make_executor, tmp_path, body, "B:SIGUSR1")
    assert "shell got USR1" in text, text
    assert "child done" in text
    assert "task got USR1" not in text
    assert "shell exits" in text


def test_a_signal_without_batch_reaches_the_tasks_not_the_shell(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    body = (
        "trap 'echo shell got USR1' USR1\n"
        f'srun -n1 {sys.executable} -c "{CHILD}" {tmp_path}\n'
        "echo after srun\n"
    )
    text = _signalled(make_executor, tmp_path, body, "SIGUSR1")
    assert "task got USR1" in text, text
    assert "shell got USR1" not in text
    assert "after srun" in text


def test_a_signal_without_batch_spares_the_subshell_of_a_background_srun(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """With a trap set, bash runs `srun ... &` under a forked copy of itself: that subshell
    died of the USR1 meant for the tasks, and `wait` returned 138 before the step ended. The
    tasks get it; the shell and its subshell do not, so `wait` returns the step's status."""
    body = (
        "trap 'echo shell got USR1' USR1\n"
        f'srun -n1 {sys.executable} -c "{CHILD}" {tmp_path} &\n'
        "pid=$!\nwait $pid\necho wait returned $?\n"
    )
    text = _signalled(make_executor, tmp_path, body, "SIGUSR1")
    assert "task got USR1" in text, text
    assert "shell got USR1" not in text
    assert "wait returned 0" in text
