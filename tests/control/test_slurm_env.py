"""The job-wide SLURM_* variables a row gives its job (control/loop/launchspec.py)."""

from __future__ import annotations

import pytest

from railyard.client.scripts import merge, parse_args, parse_script
from railyard.control.loop.launchspec import slurm_compat_env
from railyard.control.store.tables import JobRow
from railyard.control.submission import JobSubmit
from railyard.control.usecases.admission import gpus_per_node_asked


def _row(**kw: object) -> JobRow:
    fields: dict[str, object] = {
        "number": 7, "task_number": None, "name": "train", "queue": "gpu", "restart_count": 0,
        "submit_dir": "/home/a", "submit_host": "login1", "cpus_per_task": 0,
        "mem_per_node_mb": 0, "export": "ALL", "array_parent": None, "array_index": None,
        "dependency": None, "command": ["true"], "script": None,
    }  # fmt: skip
    return JobRow(**(fields | kw))


def test_a_dependency_is_in_slurm_job_dependency_as_given() -> None:
    assert "SLURM_JOB_DEPENDENCY" not in slurm_compat_env(_row())
    env = slurm_compat_env(_row(dependency="afterok:3:4,afterany:5"))
    assert env["SLURM_JOB_DEPENDENCY"] == "afterok:3:4,afterany:5"
    assert (env["SLURM_JOB_ID"], env["SLURM_JOB_PARTITION"]) == ("7", "gpu")


def test_memory_is_said_in_the_spelling_the_job_asked() -> None:
    """sbatch sets one of SLURM_MEM_PER_NODE, _PER_CPU, _PER_GPU (compare_scripts.py)."""
    node = slurm_compat_env(_row(mem_per_node_mb=2048))
    cpu = slurm_compat_env(_row(mem_per_node_mb=2048, mem_per_cpu_mb=512))
    gpu = slurm_compat_env(_row(mem_per_node_mb=2048, mem_per_gpu_mb=1024))
    memory = [{k: v for k, v in e.items() if k.startswith("SLURM_MEM")} for e in (node, cpu, gpu)]
    assert memory == [
        {"SLURM_MEM_PER_NODE": "2048"},
        {"SLURM_MEM_PER_CPU": "512"},
        {"SLURM_MEM_PER_GPU": "1024"},
    ]


def test_export_none_or_a_list_says_get_user_env_as_sbatch() -> None:
    assert "SLURM_GET_USER_ENV" not in slurm_compat_env(_row())
    for export in ("NONE", "PATH,HOME"):
        env = slurm_compat_env(_row(export=export))
        assert (env["SLURM_GET_USER_ENV"], env["SLURM_EXPORT_ENV"]) == ("1", export)


def test_a_met_dependency_stays_in_slurm_job_dependency_as_submitted() -> None:
    """The loop clears a met dependency (so a requeue does not wait again); sbatch keeps
    SLURM_JOB_DEPENDENCY as submitted."""
    env = slurm_compat_env(_row(dependency=None, met_dependency="afterok:14"))
    assert env["SLURM_JOB_DEPENDENCY"] == "afterok:14"


def test_account_qos_and_gpus_per_node_as_sbatch_sets_them() -> None:
    env = slurm_compat_env(
        _row(priority=1000, distinct_nodes=True, gpus_per_worker=4, gpus_per_node_asked="4")
    )
    assert (env["SLURM_JOB_ACCOUNT"], env["SLURM_JOB_QOS"]) == ("gpu", "high")
    assert env["SLURM_GPUS_PER_NODE"] == "4"
    spread = slurm_compat_env(_row(priority=731, distinct_nodes=False, gpus_per_worker=1))
    assert spread["SLURM_JOB_QOS"] == "normal"  # Slurm's default QOS
    niced = slurm_compat_env(_row(priority=990, nice=10, distinct_nodes=False, gpus_per_worker=1))
    assert niced["SLURM_JOB_QOS"] == "high"  # stored after its nice: still asked as high
    assert "SLURM_GPUS_PER_NODE" not in spread  # --gpus N: GPUs per job, not per node


def test_gpus_per_node_is_set_only_for_gpus_per_node_as_given() -> None:
    """sbatch(1) 22.05: SLURM_GPUS_PER_NODE "Only set if the --gpus-per-node option is
    specified", with the value as typed; --gres=gpu:4 also puts 4 GPUs on each node, and
    sets none."""
    gres = slurm_compat_env(_row(distinct_nodes=True, gpus_per_worker=4, gpus_per_node_asked=None))
    assert "SLURM_GPUS_PER_NODE" not in gres
    typed = _row(distinct_nodes=True, gpus_per_worker=2, gpus_per_node_asked="h100:2")
    assert slurm_compat_env(typed)["SLURM_GPUS_PER_NODE"] == "h100:2"


@pytest.mark.parametrize(
    ("options", "kept"),
    [
        ("--gres=gpu:2", None),
        ("--gres=gpu:h100:2", None),
        ("--gres=gpu", None),
        ("--gpus-per-node=2", "2"),
        ("--gpus-per-node=h100:2", "h100:2"),
        ("--gres=gpu:4 --gpus-per-node=2", "2"),  # the later option says how
        ("--gpus-per-node=2 --gres=gpu:4", None),
        ("--gpus=2", None),
    ],
)
def test_a_job_keeps_whether_it_asked_gpus_per_node(options: str, kept: str | None) -> None:
    spec = JobSubmit(command=["true"], **parse_args(options.split(), []))
    assert gpus_per_node_asked(spec) == kept


def test_a_script_line_or_flag_says_which_gpu_option_was_meant() -> None:
    """A later #SBATCH line, or a command-line flag, replaces an earlier --gres."""
    gres = parse_script("#!/bin/bash\n#SBATCH --gres=gpu:4\ntrain\n").options
    later = parse_script("#!/bin/bash\n#SBATCH --gres=gpu:4\n#SBATCH --gpus-per-node=2\nx\n")
    assert gres["gres"]
    assert "gres" not in later.options
    assert "gres" not in merge(gres, parse_args(["--gpus-per-node=2"], []))
    assert merge(gres, parse_args(["--gres=gpu:2"], []))["gres"]


def test_no_umask_in_the_job_wide_variables() -> None:
    """slurmstepd unsets SLURM_UMASK in the batch step (ulimits.c, since 16.05.6); a task's
    comes from its srun (exec.task.launch.task_env)."""
    assert "SLURM_UMASK" not in slurm_compat_env(_row(umask=0o027))
    assert "SLURM_UMASK" not in slurm_compat_env(_row(umask=0o027, script="#!/bin/bash\n"))
