"""A job row as the executor sees it (:class:`~railyard.exec.protocol.LaunchSpec`), and the
job-wide Slurm variables its processes get.

Compared with sbatch/srun 22.05 on Debian 12 (``benchmarks/slurm/compare_env.py``): the
variables about the job (``SLURM_JOB_ID``, ``SLURM_JOB_NAME``, ``SLURM_SUBMIT_DIR``,
``SLURM_ARRAY_*``...) are set here; the ones about the allocation and each task
(``SLURM_JOB_NODELIST``, ``SLURM_NTASKS``, ``SLURM_PROCID``...) by the executor, which knows
the layout (:mod:`railyard.exec.task.launch`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from railyard.client.values import array_stats, qos_of
from railyard.control.jobspec import loads_login_env
from railyard.control.store.paths import checkpoint_dir, logs_dir, script_path, steps_dir
from railyard.control.store.tables import JobRow
from railyard.control.usecases.apps import app_dir, app_launch_env
from railyard.exec.containers.container import ContainerSpec
from railyard.exec.protocol import LaunchSpec, Output
from railyard.exec.task.identity import JOB_UMASK


def launch_spec(
    row: JobRow,
    spool: Path,
    nccl_env: Mapping[str, str],
    cluster: str = "railyard",
    *,
    records: Path | None = None,
    terminal_linger_s: float = 30.0,
    step_mounts: Sequence[str] = (),
) -> LaunchSpec:
    """The executor's view of a job row: who, where, with what environment and files.

    ``records`` holds the attempts' start markers and exit records
    (:func:`railyard.control.store.paths.attempts_dir`, the server's own directory);
    ``terminal_linger_s``: how long an interactive job outlives a lost client;
    ``step_mounts``: what a bare batch script's ``srun --container-image`` steps may mount
    (its queue's prefixes when it starts; a job's own container keeps those of its submit)."""
    batch = row.script is not None
    app = row.terminal == "app"
    script = script_path(spool, row.id) if batch else None
    fields = {"j": str(row.task_number or row.number), "x": row.name or _default_name(row),
              "u": row.unix_user}  # fmt: skip
    if row.array_parent is not None:
        fields |= {"A": row.array_parent, "a": str(row.array_index)}
    command = tuple(row.command)
    if script is not None and row.script is not None:
        # Run by its #! line, as sbatch does; a script without one (sbatch refuses it) by bash.
        command = (str(script),) if row.script.startswith("#!") else ("bash", str(script))
    return LaunchSpec(
        job_id=row.id,
        command=command,
        placement={node: tuple(gpus) for node, gpus in (row.placement or {}).items()},
        gpus_per_worker=row.gpus_per_worker,
        workers=row.workers,
        restart_count=row.restart_count,
        env=dict(row.env),
        job_env=slurm_compat_env(row, cluster) | (app_launch_env(spool, row.id) if app else {}),
        login_env=loads_login_env(row.export),
        user=row.unix_user or None,
        batch=batch,
        ntasks_per_node=row.ntasks_per_node,
        workdir=Path(row.workdir),  # empty: the account's home (the executor's choice)
        log_dir=logs_dir(spool, row.id),
        checkpoint_dir=checkpoint_dir(spool, row.id),
        steps_dir=steps_dir(spool, row.id) if batch else None,
        script=row.script,
        script_path=script,
        output=Output(
            stdout=row.output,
            stderr=row.error,
            fields=fields,
            append=row.open_mode == "append",
        ),
        cpus_per_task=row.cpus_per_task,
        cpus_per_node=row.cpus_per_worker,
        tasks_given=row.tasks_given,
        ntasks_alone=row.ntasks_alone,
        gpus_per_task=row.gpus_per_task or 0,
        mem_per_node_mb=row.mem_per_node_mb,
        preempt_signal=row.preempt_signal,
        signal_batch_shell=row.signal_batch_shell,
        umask=JOB_UMASK if row.umask is None else row.umask,
        terminal="" if app else row.terminal,
        app_dir=app_dir(spool, row.id) if app else None,
        terminal_linger_s=terminal_linger_s,
        nccl_env=dict(nccl_env),
        records_dir=records,
        container=ContainerSpec.from_dict(row.container) if row.container else None,
        container_allowed=(
            tuple(row.container.get("allowed", ())) if row.container else tuple(step_mounts)
        ),
    )


def _default_name(row: JobRow) -> str:
    """sbatch names a job after its script (``sbatch``'s ``--wrap`` jobs are "wrap")."""
    if row.script is not None:
        return "script.sh"
    return Path(row.command[0]).name if row.command else "railyard"


def slurm_compat_env(row: JobRow, cluster: str = "railyard") -> dict[str, str]:
    """The job-wide variables sbatch 22.05 sets, so #SBATCH scripts run unchanged.

    The allocation's (``SLURM_JOB_NODELIST``, ``SLURM_NTASKS``...) and each task's
    (``SLURM_PROCID``...) come from the executor, which knows the layout. An array task's
    ``SLURM_JOB_ID`` is its own number, as in Slurm; the ``3_1`` spelling is railyard's id
    (``RAILYARD_JOB_ID``).
    """
    number = str(row.task_number or row.number)
    env = {
        "SLURM_JOB_ID": number,
        "SLURM_JOBID": number,
        "SLURM_JOB_NAME": row.name or _default_name(row),
        "SLURM_JOB_PARTITION": row.queue,
        "SLURM_CLUSTER_NAME": cluster,
        "SLURM_PRIO_PROCESS": "0",
        # No SLURM_UMASK: slurmstepd unsets it in the batch step; each task's comes from its
        # srun (railyard.exec.task.launch.task_env).
        # railyard has no accounts: its queues are what quota and fair share are charged to
        "SLURM_JOB_ACCOUNT": row.queue,
        "SLURM_JOB_QOS": qos_of(row.priority, row.nice),
    }
    if row.restart_count:
        env["SLURM_RESTART_COUNT"] = str(row.restart_count)  # sbatch: only once requeued
    if row.submit_dir:
        env["SLURM_SUBMIT_DIR"] = row.submit_dir
    if row.submit_host:
        env["SLURM_SUBMIT_HOST"] = row.submit_host
    if row.cpus_per_task:
        env["SLURM_CPUS_PER_TASK"] = str(row.cpus_per_task)
    if row.gpus_per_task:  # srun in a batch script binds its tasks by it too
        env["SLURM_GPUS_PER_TASK"] = str(row.gpus_per_task)
    if row.mem_per_cpu_mb:  # as sbatch: the spelling the job asked in, one of the three
        env["SLURM_MEM_PER_CPU"] = str(row.mem_per_cpu_mb)
    elif row.mem_per_gpu_mb:
        env["SLURM_MEM_PER_GPU"] = str(row.mem_per_gpu_mb)
    elif row.mem_per_node_mb:
        env["SLURM_MEM_PER_NODE"] = str(row.mem_per_node_mb)
    if row.export.strip().upper() != "ALL":
        env["SLURM_EXPORT_ENV"] = row.export
        env["SLURM_GET_USER_ENV"] = "1"  # sbatch: --export=NONE or a list implies --get-user-env
    dependency = row.dependency or row.met_dependency
    if dependency:  # as given to --dependency, kept once met (sbatch)
        env["SLURM_JOB_DEPENDENCY"] = dependency
    if row.gpus_per_node_asked:  # sbatch(1) 22.05: "Only set if the --gpus-per-node option
        # is specified", as given ([TYPE:]N); never for --gres=gpu:N
        env["SLURM_GPUS_PER_NODE"] = row.gpus_per_node_asked
    if row.array_parent is not None and row.array_index is not None:
        env |= array_env(row.array_parent, row.array_index, row.array_spec)
    return env


_array_stats = lru_cache(maxsize=256)(array_stats)
"""An array's figures by its spec as stored: parsed once per array, not at each task's start
(10,000 tasks of ``0-9999`` expanded it 10,000 times)."""


def array_env(parent: str, index: int, spec: str | None) -> dict[str, str]:
    """SLURM_ARRAY_* as sbatch sets them: MIN/MAX/COUNT over the whole array, STEP of a
    ``first-last:step`` range (1 for a list)."""
    env = {
        "SLURM_ARRAY_JOB_ID": parent,
        "SLURM_ARRAY_TASK_ID": str(index),
        "RAILYARD_ARRAY_TASK_ID": str(index),
    }
    if spec:
        count, low, high, step = _array_stats(spec)
        env |= {
            "SLURM_ARRAY_TASK_COUNT": str(count),
            "SLURM_ARRAY_TASK_MIN": str(low),
            "SLURM_ARRAY_TASK_MAX": str(high),
            "SLURM_ARRAY_TASK_STEP": str(step),
        }
    return env
