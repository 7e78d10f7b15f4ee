"""Variables Slurm 22.05 sets only as the job or step asked: ``SLURM_NTASKS_PER_NODE`` only
with ``--ntasks-per-node``, ``SLURM_UMASK`` in srun's tasks (srun's umask) and never in the
batch shell (benchmarks/slurm/compare_scripts.py found both railyard-only)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from exec_helpers import spec

from railyard.exec.task.identity import Account
from railyard.exec.task.launch import (
    allocation,
    batch_env,
    process_env,
    rank_layout,
    task_env,
    task_layout,
)
from railyard.exec.task.srun import Step, step_tasks

TWO = allocation({"n0": (0, 1)}, ntasks_per_node=2)


@pytest.fixture
def umask_027() -> Iterator[None]:
    """This process's umask 027 for the test (srun reads its own)."""
    old = os.umask(0o027)
    yield
    os.umask(old)


def _task(**kw: object) -> dict[str, str]:
    slot = task_layout(TWO)[0]
    return task_env(TWO, slot, master_addr="127.0.0.1", master_port=29500, **kw)  # type: ignore[arg-type]


def test_a_task_says_the_umask_it_was_given_as_srun_spells_it() -> None:
    assert _task(umask=0o027)["SLURM_UMASK"] == "0027"
    assert _task(umask=0o002)["SLURM_UMASK"] == "0002"


def test_ntasks_per_node_only_when_it_was_asked() -> None:
    """srun 22.05 sets SLURM_NTASKS_PER_NODE from --ntasks-per-node alone (srun.c); the task
    counts stay."""
    alone = _task(per_node_given=False)
    assert "SLURM_NTASKS_PER_NODE" not in alone
    assert (alone["SLURM_NTASKS"], alone["SLURM_TASKS_PER_NODE"]) == ("2", "2")
    assert _task()["SLURM_NTASKS_PER_NODE"] == "2"


def test_the_batch_shell_has_no_ntasks_per_node_with_ntasks_alone() -> None:
    """sbatch(1) 22.05: "Only set if the --ntasks-per-node option is specified"."""
    alone = batch_env(TWO, per_node_given=False)
    assert "SLURM_NTASKS_PER_NODE" not in alone
    assert (alone["SLURM_NTASKS"], alone["SLURM_NPROCS"]) == ("2", "2")
    assert batch_env(TWO)["SLURM_NTASKS_PER_NODE"] == "2"


@pytest.mark.parametrize("batch", [False, True])
def test_a_jobs_processes_get_umask_and_task_counts_as_slurm_gives_them(
    tmp_path: Path, batch: bool
) -> None:
    """A command job's tasks (srun's) say the submitter's umask; the batch shell none (its
    umask is applied, SLURM_UMASK unset, as slurmstepd does). ``--ntasks`` alone: no
    SLURM_NTASKS_PER_NODE in either."""
    job = spec(tmp_path, ("job.sh",), gpus_per_worker=2, gpus=(0, 1), ntasks_per_node=2,
               batch=batch, umask=0o077, ntasks_alone=True)  # fmt: skip
    slot = rank_layout(job)[0]
    env = process_env(job, Account.current(), slot, master_addr="127.0.0.1", master_port=29500)
    assert env["SLURM_NTASKS"] == "2"
    assert "SLURM_NTASKS_PER_NODE" not in env
    assert env.get("SLURM_UMASK") == (None if batch else "0077")


def _step(per_node_given: bool = False) -> Step:
    return Step(TWO, ["true"], per_node_given=per_node_given)


BATCH_SHELL = {"SLURMD_NODENAME": "n0", "MASTER_PORT": "29500", "SLURM_JOB_ID": "9"}


@pytest.mark.usefixtures("umask_027")
def test_srun_passes_its_own_umask_and_ntasks_per_node_only_when_asked() -> None:
    """srun 22.05 (srun_job.c): SLURM_UMASK is srun's umask unless its environment has one;
    SLURM_NTASKS_PER_NODE only from --ntasks-per-node, given to srun or to the job (the batch
    shell then has it)."""
    _, tasks = step_tasks(_step(), dict(BATCH_SHELL), "127.0.0.1")
    assert [env["SLURM_UMASK"] for _, env in tasks] == ["0027", "0027"]
    assert not any("SLURM_NTASKS_PER_NODE" in env for _, env in tasks)
    _, tasks = step_tasks(_step(per_node_given=True), dict(BATCH_SHELL), "127.0.0.1")
    assert [env["SLURM_NTASKS_PER_NODE"] for _, env in tasks] == ["2", "2"]
    shell = {**BATCH_SHELL, "SLURM_NTASKS_PER_NODE": "2", "SLURM_UMASK": "0007"}
    _, tasks = step_tasks(_step(), shell, "127.0.0.1")
    assert [(e["SLURM_NTASKS_PER_NODE"], e["SLURM_UMASK"]) for _, e in tasks] == [("2", "0007")] * 2
