"""The launch contract, one test per bullet, end to end: a submission through ``jobs.submit``,
the scheduler loop, the LocalExecutor and real processes; every task's environment is checked
against what Slurm 22.05 (sbatch/srun, compared on Debian 12 by benchmarks/slurm/compare_env.py)
and torchrun set. SQLite only: the store's part is covered on both databases elsewhere."""

from __future__ import annotations

import shlex
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from tests.control.loop_helpers import Cluster, states

from railyard.control.errors import Invalid
from railyard.control.store.convert import SCHED_COLUMNS, to_job
from railyard.control.store.tables import JobRow, NodeRow
from railyard.control.submission import JobSubmit
from railyard.exec.task.identity import Account

DUMP = (
    "import json, os, sys; d = sys.argv[1]; "
    "tag = os.environ.get('SLURM_STEP_ID', 'b') + '-' + os.environ.get('RANK', 'batch'); "
    "name = os.environ['SLURM_JOB_ID'] + '-' + tag; "
    "open(os.path.join(d, name + '.json'), 'w').write(json.dumps(dict(os.environ)))"
)
# What srun 22.05 sets in every task (seen in benchmarks/slurm/compare_env.py), and torchrun's.
SRUN_TASK_VARS = {
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
    "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NPROCS",
    "SLURM_TASKS_PER_NODE", "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_GTIDS",
    "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_GPUS_ON_NODE",
    "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST",
    "SLURM_JOB_PARTITION", "SLURM_JOB_UID", "SLURM_JOB_GID", "SLURM_JOB_USER",
    "SLURM_TASK_PID", "SLURMD_NODENAME", "SLURM_CLUSTER_NAME", "SLURM_PRIO_PROCESS",
    "SLURM_DISTRIBUTION", "SLURM_UMASK", "SLURM_LAUNCH_NODE_IPADDR", "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
}  # fmt: skip
TORCHRUN_VARS = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
}  # fmt: skip
# What sbatch 22.05 sets in the batch step that applies here.
SBATCH_VARS = {
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
    "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_GTIDS",
    "SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST",
    "SLURM_JOB_PARTITION", "SLURM_JOB_UID", "SLURM_JOB_GID", "SLURM_JOB_USER",
    "SLURM_TASK_PID", "SLURMD_NODENAME", "SLURM_CLUSTER_NAME", "SLURM_CPUS_PER_TASK",
    "ENVIRONMENT", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "TMPDIR",
}  # fmt: skip


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    yield made
    made.store.close()


def dump(cluster: Cluster) -> list[str]:
    return [sys.executable, "-c", DUMP, str(cluster.out)]


def test_command_job_starts_one_task_per_gpu_each_seeing_all(cluster: Cluster) -> None:
    """`railyard submit --gpus 4 -- CMD`: four tasks, like srun; every task sees the node's
    four GPUs and LOCAL_RANK indexes them (torch.cuda.set_device(LOCAL_RANK) works)."""
    [job_id] = cluster.submit(command=dump(cluster), gpus=4, name="cmd", cpus_per_task=2)
    cluster.run(job_id)
    me = Account.current()
    for rank in range(4):
        env = cluster.env(f"1-0-{rank}")
        assert env.keys() >= SRUN_TASK_VARS | TORCHRUN_VARS
        visible = env["CUDA_VISIBLE_DEVICES"].split(",")
        assert visible == ["0", "1", "2", "3"]
        assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # indices are NVML's: PCI bus order
        assert int(env["LOCAL_RANK"]) < len(visible)
        assert env["RANK"] == env["SLURM_PROCID"] == env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["SLURM_NTASKS"] == env["LOCAL_WORLD_SIZE"] == "4"
        assert env["SLURM_JOB_ID"] == env["SLURM_JOBID"] == "1"
        assert env["SLURM_JOB_NAME"] == "cmd"
        assert env["SLURM_JOB_PARTITION"] == "default"
        assert (env["SLURM_SUBMIT_DIR"], env["SLURM_SUBMIT_HOST"]) == (str(cluster.tmp), "login-1")
        assert env["SLURM_CPUS_PER_TASK"] == "2"
        assert (env["SLURM_JOB_USER"], env["SLURM_JOB_UID"]) == (me.name, str(me.uid))
        assert env["FROM_SUBMITTER"] == "yes"  # the submitter's environment, not the server's
        assert env["PATH"] == "/usr/bin:/bin"
        assert env["PWD"] == str(cluster.out)
        assert env["RAILYARD_JOB_ID"] == "1"
        assert "ENVIRONMENT" not in env


def test_ntasks_per_node_one_runs_one_task_with_every_gpu(cluster: Cluster) -> None:
    """`--ntasks-per-node 1`: one process (a script that calls torchrun itself)."""
    [job_id] = cluster.submit(command=dump(cluster), gpus=4, ntasks_per_node=1)
    cluster.run(job_id)
    env = cluster.env("1-0-0")
    assert not (cluster.out / "1-0-1.json").exists()
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert env["WORLD_SIZE"] == env["SLURM_NTASKS"] == env["SLURM_NTASKS_PER_NODE"] == "1"
    with cluster.store.session() as session:
        row = session.get(JobRow, job_id)
        assert row is not None
        assert (row.workers, row.gpus_per_worker, row.ntasks_per_node) == (1, 4, 1)


def test_batch_script_runs_once_with_sbatch_env_and_srun_starts_the_tasks(
    cluster: Cluster,
) -> None:
    """A batch script runs once on the first node (sbatch), its output in slurm-%j.out in
    the working directory; `srun python ...` starts the job's tasks with srun's and
    torchrun's variables."""
    line = shlex.join(dump(cluster))
    script = (
        "#!/bin/bash\n#SBATCH --gres=gpu:2 --ntasks-per-node=2 -c 3\n"
        f"echo in batch\n{line}\nsrun {line}\n"
    )
    [job_id] = cluster.submit(
        script=script, gpus_per_node=2, ntasks_per_node=2, cpus_per_task=3, name="job.sh"
    )
    cluster.run(job_id)
    shell = cluster.env("1-b-batch")
    assert shell.keys() >= SBATCH_VARS
    assert shell["ENVIRONMENT"] == "BATCH"
    assert (shell["SLURM_NTASKS"], shell["SLURM_GPUS_ON_NODE"]) == ("2", "2")
    assert (shell["SLURM_CPUS_PER_TASK"], shell["SLURM_CPUS_ON_NODE"]) == ("3", "6")
    assert shell["SLURM_JOB_NAME"] == "job.sh"
    assert shell["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "RANK" not in shell
    for rank in range(2):
        task = cluster.env(f"1-0-{rank}")
        assert task.keys() >= SRUN_TASK_VARS | TORCHRUN_VARS
        assert task["RANK"] == task["SLURM_PROCID"] == str(rank)
        assert task["CUDA_VISIBLE_DEVICES"] == "0,1"
    output = (cluster.out / "slurm-1.out").read_text()
    assert not output.startswith("==== railyard")  # the job's output alone, as Slurm's file
    assert "in batch" in output
    assert cluster.log(job_id) == output  # railyard logs reads the user's output file
    assert not (cluster.out / "1-b-0.json").exists()  # the script itself ran once


def test_batch_srun_defaults_to_one_task_per_node_as_sbatch(cluster: Cluster) -> None:
    """Without --ntasks or --ntasks-per-node, sbatch's srun starts one task per node (which
    sees all the node's GPUs), so `srun torchrun ...` scripts run unchanged."""
    script = f"#!/bin/bash\n#SBATCH --gres=gpu:2\nsrun {shlex.join(dump(cluster))}\n"
    [job_id] = cluster.submit(script=script, gpus_per_node=2)
    cluster.run(job_id)
    task = cluster.env("1-0-0")
    assert (task["SLURM_NTASKS"], task["WORLD_SIZE"], task["CUDA_VISIBLE_DEVICES"]) == (
        "1",
        "1",
        "0,1",
    )
    assert not (cluster.out / "1-0-1.json").exists()


def test_array_tasks_have_numeric_job_ids_and_slurm_array_vars(cluster: Cluster) -> None:
    script = f"#!/bin/bash\n{shlex.join(dump(cluster))}\n"
    ids = cluster.submit(script=script, array="0-6:2%2", name="sweep", gpus=1)
    assert ids == ["1_0", "1_2", "1_4", "1_6"]
    cluster.run(*ids)
    numbers = []
    for index, number in zip((0, 2, 4, 6), ("2", "3", "4", "1"), strict=True):
        env = cluster.env(f"{number}-b-batch")
        numbers.append(env["SLURM_JOB_ID"])
        assert env["SLURM_ARRAY_JOB_ID"] == "1"
        assert env["SLURM_ARRAY_TASK_ID"] == str(index)
        assert (env["SLURM_ARRAY_TASK_COUNT"], env["SLURM_ARRAY_TASK_STEP"]) == ("4", "2")
        assert (env["SLURM_ARRAY_TASK_MIN"], env["SLURM_ARRAY_TASK_MAX"]) == ("0", "6")
        assert (cluster.out / f"slurm-1_{index}.out").exists()  # sbatch's slurm-%A_%a.out
    assert numbers == ["2", "3", "4", "1"]  # each its own; the last keeps the array's


def test_more_nodes_than_exist_are_refused_at_submit(cluster: Cluster) -> None:
    with pytest.raises(Invalid, match="2 nodes asked, the cluster has 1 virtual node"):
        cluster.submit(command=["true"], nodes=2, gpus_per_node=2)
    assert states(cluster.store) == {}


def test_nodes_means_distinct_nodes_for_the_scheduler(cluster: Cluster) -> None:
    """--nodes 2 --gpus-per-node 2 is two chunks on two nodes (Job.distinct_nodes); CPUs and
    memory are booked per chunk. The placement rule itself is the scheduler's."""
    with cluster.store.session() as session:
        session.add(
            NodeRow(
                name="node1",
                flavor="virtual",
                gpus=4,
                path=["su0", "su0-lg0"],
                updated_t_s=time.time(),
            )
        )
    [job_id] = cluster.submit(
        command=["true"], nodes=2, gpus_per_node=2, ntasks_per_node=2, cpus_per_task=4, mem="8G"
    )
    with cluster.store.session() as session:
        row = session.execute(select(*SCHED_COLUMNS).where(JobRow.id == job_id)).one()
        job = to_job(row, "alice")
    assert (job.workers, job.gpus_per_worker, job.distinct_nodes) == (2, 2, True)
    assert (job.cpus_per_worker, job.mem_per_worker_gb) == (8, 8.0)


def test_gpus_zero_is_a_cpu_job(cluster: Cluster) -> None:
    [job_id] = cluster.submit(command=dump(cluster), gpus=0)
    cluster.run(job_id, timeout_s=20)
    env = cluster.env("1-0-0")
    assert (env["CUDA_VISIBLE_DEVICES"], env.get("SLURM_GPUS_ON_NODE")) == ("", None)


def test_submit_host_default_is_this_machine() -> None:
    """The CLI fills SLURM_SUBMIT_HOST from the submitting machine, as sbatch."""
    spec = JobSubmit(command=["true"], submit_host=socket.gethostname())
    assert spec.submit_host == socket.gethostname()


def test_a_script_without_a_shebang_runs_with_bash(cluster: Cluster) -> None:
    """sbatch refuses such a script; railyard runs it with bash instead of failing it."""
    [job_id] = cluster.submit(script="echo from bash $BASH_VERSION\n", output="plain.out", gpus=1)
    cluster.run(job_id)
    assert "from bash 5" in (cluster.out / "plain.out").read_text()


def test_gpus_per_task_binds_each_task_to_its_own_gpus(cluster: Cluster) -> None:
    """``--ntasks=2 --gpus-per-task=2``, in a batch script whose ``srun`` starts the tasks
    and as a command job: each task sees its own two GPUs, as srun binds them (Slurm 22.05:
    CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL and SLURM_STEP_GPUS the task's, SLURM_JOB_GPUS
    the node's, SLURM_GPUS_PER_TASK; benchmarks/slurm/compare_scripts.py)."""
    line = shlex.join(dump(cluster))
    script = f"#!/bin/bash\n#SBATCH --ntasks=2 --gpus-per-task=2\nsrun {line}\n"
    [batch] = cluster.submit(script=script, gpus=None, ntasks=2, gpus_per_task=2)
    cluster.run(batch)
    [command] = cluster.submit(command=dump(cluster), gpus=None, ntasks=2, gpus_per_task=2)
    cluster.run(command)
    for number, step in ((batch, "0"), (command, "0")):
        seen = []
        for rank in range(2):
            task = cluster.env(f"{number}-{step}-{rank}")
            own = task["CUDA_VISIBLE_DEVICES"]
            assert own == task["GPU_DEVICE_ORDINAL"] == task["SLURM_STEP_GPUS"]
            assert (task["SLURM_GPUS_PER_TASK"], task["SLURM_NTASKS"]) == ("2", "2")
            assert len(own.split(",")) == 2
            seen.append(own)
        assert len(set(seen)) == 2  # each its own
        assert sorted(",".join(seen).split(",")) == sorted(task["SLURM_JOB_GPUS"].split(","))
    with cluster.store.session() as session:
        row = session.get_one(JobRow, command)
        assert (row.workers, row.gpus_per_worker, row.gpus_per_task) == (2, 2, 2)
