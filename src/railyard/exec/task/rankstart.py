"""Starting one rank of a job under the wrapper, or finding the one an earlier launch of the
same attempt claimed: the executor's (`exec.local`) hand on each process it runs.

Each process runs ``python -m railyard.exec.task.wrapper`` in a new session, so one
``killpg`` reaches it and all it spawns; the wrapper reads its task file (who, where, which
cgroups, which outputs) and writes the exit record the executor watches.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from railyard.exec import procfs
from railyard.exec.attempt import Claim, exit_record_path
from railyard.exec.cgroups.containment import StepGroups
from railyard.exec.containers.container import ContainerTask
from railyard.exec.jobstate import RankState
from railyard.exec.protocol import LaunchSpec, WorkerHandle
from railyard.exec.task import jobfiles
from railyard.exec.task.identity import Account
from railyard.exec.task.launch import (
    WRAPPER_ENV,
    RankSlot,
    process_env,
    rank_layout,
    wrapped_command,
)
from railyard.exec.task.steps import StepLauncher
from railyard.exec.task.taskfile import Task, rank_task_path
from railyard.exec.terminals import terminal

MASTER_ADDR = "127.0.0.1"


def claimed_worker(
    spec: LaunchSpec, slot: RankSlot, account: Account, claimed: Claim, *, node: str,
    records: Path,
) -> WorkerHandle:  # fmt: skip
    """The rank a wrapper of an earlier launch of this attempt claimed (and maybe ran)."""
    assert claimed.pid is not None
    assert claimed.start_time_ticks is not None
    return WorkerHandle(
        job_id=spec.job_id,
        rank=slot.rank,
        node=node,
        pid=claimed.pid,
        pgid=claimed.pid,
        start_time_ticks=claimed.start_time_ticks,
        log_path=log_path(spec, slot, account),
        exit_path=exit_record_path(records, spec.restart_count, slot.rank),
    )


def launch_rank(
    spec: LaunchSpec,
    slot: RankSlot,
    port: int,
    account: Account,
    groups: StepGroups,
    *,
    node: str,
    records: Path,
    container: ContainerTask | None = None,
    steps: StepLauncher | None = None,
) -> RankState:
    """Start one process under the wrapper, in a session of its own; its task file says who
    and how. ``records``: where this node's ranks keep their exit and terminal records."""
    spool_log = spec.log_dir / f"rank-{slot.rank}.log"
    exit_path = exit_record_path(records, spec.restart_count, slot.rank)
    task_path = rank_task_path(spec.log_dir, slot.rank, spec.restart_count)
    exit_path.unlink(missing_ok=True)
    srun_dir = jobfiles.install_shims(spec.log_dir / "bin") if spec.batch else None
    master = spec.master_addr or MASTER_ADDR
    env = process_env(spec, account, slot, master_addr=master, master_port=port, srun_dir=srun_dir)
    stdout, stderr = jobfiles.output_paths(spec, slot, slot.node_rank)
    interactive = bool(spec.terminal) and slot.rank == 0
    if interactive:  # its output goes to the client; the spool log keeps the header
        stdout = stderr = None
    processes = len(rank_layout(spec))
    # A batch shell starts with every signal at its default, so that its `trap` works;
    # a signal for the steps alone is kept from it by whom it is sent to (_signal_live).
    ignore: tuple[str, ...] = ()
    cwd = workdir(spec, account)
    task = Task(
        env=env,
        cwd=cwd,
        account=account,
        stdout=stdout,
        stderr=stderr,
        # Only the first process truncates a shared --output file; the others append, and
        # so does every process of --open-mode=append. A requeued attempt starts the file
        # over, as Slurm 22.05's (JobFileAppend=0): scripts that keep it ask for append.
        truncate=not spec.output.append and slot.rank == 0,
        header=jobfiles.header(
            spec,
            slot,
            account,
            env,
            processes=processes,
            port=port,
            limits=groups.limits_line,
            devices=groups.devices_line,
        ),
        ignore_signals=ignore,
        umask=spec.umask,
        cgroups=groups.paths,
        subreaper=groups.subreaper,
        terminal=(str(terminal.socket_path(records, spec.restart_count)) if interactive else None),
        pty=interactive and spec.terminal == "pty",
        linger_s=spec.terminal_linger_s,
        container=container,
        steps=steps,
    )
    task.write(task_path)
    log_fd = jobfiles.open_spool_log(spool_log, account)
    try:
        proc = subprocess.Popen(
            wrapped_command(spec.command, exit_path, task_path),
            cwd="/",
            env=WRAPPER_ENV,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        os.close(log_fd)
    worker = WorkerHandle(
        job_id=spec.job_id,
        rank=slot.rank,
        node=node,
        pid=proc.pid,
        pgid=proc.pid,  # a new session's leader leads its process group
        start_time_ticks=procfs.start_time_ticks(proc.pid),  # unreaped: /proc entry stays
        log_path=log_path(spec, slot, account),
        exit_path=exit_path,
    )
    return RankState(worker, proc)


def log_path(spec: LaunchSpec, slot: RankSlot, account: Account) -> Path:
    """Where a reader finds the process's output: its --output file, else the spool log."""
    stdout, _ = jobfiles.output_paths(spec, slot, slot.node_rank)
    if not stdout:
        return spec.log_dir / f"rank-{slot.rank}.log"
    return Path(workdir(spec, account), stdout)


def workdir(spec: LaunchSpec, account: Account) -> str:
    return str(spec.workdir) if str(spec.workdir) not in ("", ".") else account.home
