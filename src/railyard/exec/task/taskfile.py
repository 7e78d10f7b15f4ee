"""The task file: how the wrapper starts one process of a job (who, where, which environment,
which output files). Written by the executor, readable only by it, read by
:mod:`railyard.exec.task.wrapper`; the user's environment travels here, never through the
wrapper's own environment.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from railyard.exec.task.identity import JOB_UMASK, Account

TYPE_CHECKING = False  # not typing's: importing typing would cost every rank ~5 ms

if TYPE_CHECKING:  # read only for container and step tasks: a bare rank's wrapper starts faster
    from railyard.exec.containers.container import ContainerTask
    from railyard.exec.task.steps import StepLauncher


def rank_task_path(log_dir: Path, rank: int, restart_count: int) -> Path:
    """The task file the executor writes for ``rank`` of attempt ``restart_count`` (in the
    job's log directory, which the executor owns)."""
    return log_dir / f"rank-{rank}.restart-{restart_count}.task.json"


@dataclass(frozen=True)
class Task:
    """How to start one process: written by the executor (0600, its own directory), read by
    the wrapper. ``account`` None: run as the wrapper's own account. ``stdout``/``stderr``:
    files to open as the user (None: keep the inherited descriptor, the spool log);
    ``truncate`` on a first attempt, append after a restart. ``ignore_signals`` are set to
    SIG_IGN for the command (a batch shell ignores the preempt signal meant for its tasks).
    ``cgroups``: the step's groups (tracking, devices, limits) the wrapper joins before it runs
    anything; ``subreaper``: no tracking group, the wrapper reaps and kills orphans itself.
    ``terminal``: an interactive task's socket (:mod:`railyard.exec.terminals.terminal`), ``pty``
    whether
    it gets a pseudo-terminal, ``linger_s`` how long it outlives a lost client; ``lossless``:
    the terminal carries a byte stream (``ssh job-N``) whose input must never be dropped, so
    the client is read only as fast as the task takes its input. ``container``: run it in
    this image (:mod:`railyard.exec.containers.containerrun`); ``steps``: a bare batch script's
    launcher
    of ``srun --container-image`` steps (:mod:`railyard.exec.task.stepd`)."""

    env: dict[str, str]
    cwd: str
    account: Account | None = None
    umask: int = JOB_UMASK
    stdout: str | None = None
    stderr: str | None = None
    truncate: bool = True
    header: str = ""
    ignore_signals: tuple[str, ...] = ()
    cgroups: tuple[str, ...] = ()
    subreaper: bool = False
    terminal: str | None = None
    pty: bool = False
    linger_s: float = 30.0
    lossless: bool = False
    container: ContainerTask | None = None
    steps: StepLauncher | None = None

    def write(self, path: Path) -> None:
        data = {
            "env": self.env,
            "cwd": self.cwd,
            "account": self.account.to_dict() if self.account else None,
            "umask": self.umask,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "truncate": self.truncate,
            "header": self.header,
            "ignore_signals": list(self.ignore_signals),
            "cgroups": list(self.cgroups),
            "subreaper": self.subreaper,
            "terminal": self.terminal,
            "pty": self.pty,
            "linger_s": self.linger_s,
            "lossless": self.lossless,
            "container": self.container.to_dict() if self.container else None,
            "steps": self.steps.to_dict() if self.steps else None,
        }
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            # dumps, not dump: `json.dump` encodes with closures that refer to each other, a
            # cycle per call that only a full collection frees (the loop's is rare, see
            # `loop.service.freeze_heap`): a server's memory grew with the jobs it started
            f.write(json.dumps(data))
        os.replace(tmp, path)

    @classmethod
    def read(cls, path: Path) -> Task:
        data = json.loads(path.read_text())
        account = data.get("account")
        container = steps = None
        if data.get("container"):
            from railyard.exec.containers.container import ContainerTask

            container = ContainerTask.from_dict(data["container"])
        if data.get("steps"):
            from railyard.exec.task.steps import StepLauncher

            steps = StepLauncher.from_dict(data["steps"])
        return cls(
            env={str(k): str(v) for k, v in data["env"].items()},
            cwd=str(data["cwd"]),
            account=Account.from_dict(account) if account else None,
            umask=int(data.get("umask", JOB_UMASK)),
            stdout=data.get("stdout"),
            stderr=data.get("stderr"),
            truncate=bool(data.get("truncate", True)),
            header=str(data.get("header", "")),
            ignore_signals=tuple(data.get("ignore_signals", ())),
            cgroups=tuple(str(g) for g in data.get("cgroups", ())),
            subreaper=bool(data.get("subreaper", False)),
            terminal=data.get("terminal"),
            pty=bool(data.get("pty", False)),
            linger_s=float(data.get("linger_s", 30.0)),
            lossless=bool(data.get("lossless", False)),
            container=container,
            steps=steps,
        )
