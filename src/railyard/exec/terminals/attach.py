"""``railyard attach JOB [--rank R]``: a shell inside a running job, as its user (Slurm's
``srun --jobid=N --overlap --pty bash``, or an SSH that ``pam_slurm_adopt`` lands in the job).

The shell is one more process of the rank's step: its task file is the rank's own (the
account, the working directory, the environment with the rank's ``SLURM_*`` and
``CUDA_VISIBLE_DEVICES``, and the step's cgroups, so it is tracked, confined to the job's GPUs
and ended with the job), with a pseudo-terminal relayed through a socket of its own
(:mod:`railyard.exec.terminals.terminal`). The rank's task file and the new one live in the
job's log
directory, which root owns; the socket and the exit record in the attempt's records
directory, which no user can reach. The shell's end is its own: the job runs on.
"""

from __future__ import annotations

import dataclasses
import secrets
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from railyard.exec.protocol import ExecutorError
from railyard.exec.task.launch import WRAPPER_ENV, wrapped_command
from railyard.exec.task.taskfile import Task


def start(
    rank_task: Path,
    records_dir: Path,
    linger_s: float,
    *,
    pty: bool = True,
    command: Callable[[Task], list[str]] | None = None,
    kind: str = "attach",
    lossless: bool = False,
) -> Path:
    """Start a shell in the rank's step; the socket its terminal listens on. With ``pty``
    an interactive shell on a terminal of its own; without, a shell reading commands from
    pipes, which ends at the end of its input (``echo cmd | railyard attach N``).
    ``command`` runs something else there instead (given the rank's task: `exec.terminals.sshd`);
    ``lossless``: its input is a byte stream (SSH's) never to be dropped
    (`exec.terminals.terminal`)."""
    try:
        task = Task.read(rank_task)
    except FileNotFoundError:
        raise ExecutorError("that rank does not run on this machine") from None
    if not task.cgroups:  # a subreaper-only step: a shell started here would outlive the job
        raise ExecutorError("this machine cannot track the job's processes (no cgroups), so "
                            "a shell attached to it could outlive it")  # fmt: skip
    name = f"{kind}-{secrets.token_hex(6)}"
    socket = records_dir / f"{name}.sock"
    attached = dataclasses.replace(
        task, stdout=None, stderr=None, truncate=False, header="", ignore_signals=(),
        terminal=str(socket), pty=pty, linger_s=linger_s, lossless=lossless,
        env={**task.env, "RAILYARD_ATTACHED": "1"},
    )  # fmt: skip
    task_path = rank_task.with_name(f"{name}.task.json")
    attached.write(task_path)
    shell = (task.account.shell if task.account else "") or "/bin/bash"
    argv = command(task) if command is not None else [shell, "-i"] if pty else [shell]
    proc = subprocess.Popen(
        wrapped_command(argv, records_dir / f"{name}.exit", task_path),
        cwd="/", env=WRAPPER_ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    threading.Thread(target=_reap, args=(proc, task_path), daemon=True).start()
    return socket


def _reap(proc: subprocess.Popen[bytes], task_path: Path) -> None:
    proc.wait()
    task_path.unlink(missing_ok=True)
