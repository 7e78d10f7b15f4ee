"""What each process sees: torchrun's and srun's variables, the job's GPUs, the user's
environment and never the executor's (real processes through the LocalExecutor)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from exec_helpers import NODE, MakeExecutor, logs, py, spec, wait_report

from railyard.client.filenames import expand_pattern
from railyard.exec import ExecutorError, Outcome
from railyard.exec.protocol import Output
from railyard.exec.task.identity import JOB_UMASK, Account, login_path
from railyard.exec.task.launch import (
    allocation,
    batch_env,
    decode_allocation,
    encode_allocation,
    rank_layout,
    task_layout,
    tasks_per_node,
)

DUMP_ENV = (
    "import json, os, sys; "
    "open(os.path.join(sys.argv[1], 'env-' + os.environ.get('RANK', 'batch') + '.json'), 'w')"
    ".write(json.dumps(dict(os.environ)))"
)
TOKEN = "ry_" + "A" * 43


def envs(tmp_path: Path, count: int) -> list[dict[str, str]]:
    return [json.loads((tmp_path / f"env-{r}.json").read_text()) for r in range(count)]


def test_one_task_per_gpu_each_sees_every_gpu_of_its_node(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """torchrun's contract: LOCAL_RANK indexes CUDA_VISIBLE_DEVICES, which lists all the job's
    GPUs on the node, so torch.cuda.set_device(LOCAL_RANK) works in every task."""
    executor = make_executor(gpus=4)
    job = spec(
        tmp_path,
        py(DUMP_ENV, str(tmp_path)),
        workers=2,
        gpus_per_worker=2,
        gpus=(0, 1, 2, 3),
        env={"USER_EXTRA": "1", "RANK": "99", "NCCL_DEBUG": "INFO"},
        job_env={"SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "probe"},
        nccl_env={"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"},
    )
    handle = executor.start(job)
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    assert len(handle.workers) == 4
    for rank, env in enumerate(envs(tmp_path, 4)):
        visible = env["CUDA_VISIBLE_DEVICES"].split(",")
        assert visible == ["0", "1", "2", "3"]
        assert int(env["LOCAL_RANK"]) < len(visible)
        assert env["RANK"] == env["SLURM_PROCID"] == env["LOCAL_RANK"] == env["SLURM_LOCALID"]
        assert env["RANK"] == str(rank)  # a user variable cannot rewire ranks
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == env["SLURM_NTASKS"] == "4"
        assert env["NODE_RANK"] == env["GROUP_RANK"] == env["SLURM_NODEID"] == "0"
        assert env["NNODES"] == env["SLURM_NNODES"] == env["SLURM_JOB_NUM_NODES"] == "1"
        assert env["SLURM_JOB_NODELIST"] == env["SLURMD_NODENAME"] == NODE
        assert env["SLURM_GPUS_ON_NODE"] == "4"
        assert env["SLURM_TASKS_PER_NODE"] == env["SLURM_NTASKS_PER_NODE"] == "4"
        assert env["SLURM_GTIDS"] == "0,1,2,3"
        assert env["SLURM_STEP_ID"] == "0"
        assert env["SLURM_JOB_ID"] == "7"
        assert env["SLURM_JOB_USER"] == Account.current().name
        assert int(env["SLURM_TASK_PID"]) > 1
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["MASTER_PORT"] == str(handle.master_port)
        assert env["TORCHELASTIC_RESTART_COUNT"] == env["RAILYARD_RESTART_COUNT"] == "0"
        assert env["RAILYARD_CHECKPOINT_DIR"] == str(tmp_path / "ckpt" / "job")
        assert env["NCCL_SOCKET_IFNAME"] == "eth0"  # the blueprint's default
        assert env["NCCL_DEBUG"] == "INFO"  # the user's own setting wins
        assert env["USER_EXTRA"] == "1"
        assert env["OMP_NUM_THREADS"] == "1"
        assert "ENVIRONMENT" not in env  # tasks are no batch step
    assert logs(tmp_path).count("==== railyard") == 4


def test_ntasks_per_node_one_sees_all_gpus(make_executor: MakeExecutor, tmp_path: Path) -> None:
    """--ntasks-per-node=1: one process (e.g. torchrun itself) with every GPU of the node."""
    executor = make_executor(gpus=4)
    job = spec(
        tmp_path,
        py(DUMP_ENV, str(tmp_path)),
        workers=1,
        gpus_per_worker=4,
        gpus=(0, 1, 2, 3),
        ntasks_per_node=1,
    )
    assert len(executor.start(job).workers) == 1
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    (env,) = envs(tmp_path, 1)
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert env["LOCAL_RANK"] == env["RANK"] == "0"
    assert env["WORLD_SIZE"] == env["SLURM_NTASKS"] == env["SLURM_NTASKS_PER_NODE"] == "1"


def test_cpu_job_sees_no_gpu(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor(gpus=0)
    executor.start(spec(tmp_path, py(DUMP_ENV, str(tmp_path)), restart_count=3))
    assert wait_report(executor, "job").restart_count == 3
    (env,) = envs(tmp_path, 1)
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # hides every GPU; unset would show them all
    assert "SLURM_GPUS_ON_NODE" not in env  # as Slurm leaves it for a CPU job
    assert "SLURM_JOB_GPUS" not in env
    assert env["RAILYARD_RESTART_COUNT"] == env["TORCHELASTIC_RESTART_COUNT"] == "3"


def test_never_the_executors_environment_nor_a_token(
    make_executor: MakeExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's variables (its PATH, its venv, its token) never reach a job; the user's
    own token and a parent job's SLURM_* are dropped; identity follows the account."""
    monkeypatch.setenv("RAILYARD_SERVER_ONLY", "server secret")
    monkeypatch.setenv("RAILYARD_TOKEN", TOKEN)
    executor = make_executor(gpus=0)
    user_env = {
        "PATH": "/opt/user/bin:/usr/bin:/bin",
        "RAILYARD_TOKEN": TOKEN,
        "CURL_AUTH": f"Bearer {TOKEN}",
        "SLURM_JOB_ID": "999",
        "HOME": "/somewhere/else",
        "KEEP": "kept",
    }
    executor.start(spec(tmp_path, py(DUMP_ENV, str(tmp_path)), env=user_env))
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    (env,) = envs(tmp_path, 1)
    me = Account.current()
    assert "RAILYARD_SERVER_ONLY" not in env
    assert "RAILYARD_TOKEN" not in env
    assert "CURL_AUTH" not in env
    assert not any(TOKEN in value for value in env.values())
    assert "SLURM_JOB_ID" not in env  # a parent job's id; the control plane sets the job's own
    assert env["PATH"] == "/opt/user/bin:/usr/bin:/bin"
    assert (env["HOME"], env["USER"], env["LOGNAME"]) == (me.home, me.name, me.name)
    assert env["KEEP"] == "kept"
    assert env["TMPDIR"] == "/tmp"


def test_export_none_starts_from_the_login_environment(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """--export=NONE (or a list): what `su - USER` gives, as sbatch 22.05 does, plus the list."""
    executor = make_executor(gpus=0)
    job = spec(tmp_path, py(DUMP_ENV, str(tmp_path)), env={"LISTED": "1"}, login_env=True)
    executor.start(job)
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    (env,) = envs(tmp_path, 1)
    me = Account.current()
    assert env["PATH"] == login_path(me.uid)
    assert env["MAIL"] == f"/var/mail/{me.name}"
    assert env["SHELL"] == me.shell
    assert env["LISTED"] == "1"


def test_output_pattern_is_written_in_the_working_directory(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """--output with %j/%x/%t: the tasks share a file unless the pattern names the task."""
    executor = make_executor(gpus=2)
    output = Output(stdout="out-%j-%x-%t.txt", fields={"j": "12", "x": "demo", "u": "me"})
    command = py("import os; print('hello from', os.environ['RANK'])")
    job = spec(tmp_path, command, workers=2, gpus_per_worker=1, gpus=(0, 1), output=output)
    handle = executor.start(job)
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    for rank in (0, 1):
        text = (tmp_path / f"out-12-demo-{rank}.txt").read_text()
        assert text == f"hello from {rank}\n"  # the job's output alone, as in Slurm's file
        assert handle.workers[rank].log_path == tmp_path / f"out-12-demo-{rank}.txt"
        mode = os.stat(tmp_path / f"out-12-demo-{rank}.txt").st_mode & 0o777
        assert mode == 0o666 & ~JOB_UMASK  # the submitter's umask rules, as under Slurm
    assert logs(tmp_path).count("==== railyard") == 2  # the headers stay in railyard's log


def test_missing_working_directory_runs_in_tmp(make_executor: MakeExecutor, tmp_path: Path) -> None:
    """As slurmstepd: a working directory that cannot be entered sends the job to /tmp."""
    executor = make_executor(gpus=0)
    job = spec(tmp_path, py("import os; print('cwd', os.getcwd())"), workdir=tmp_path / "gone")
    executor.start(job)
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    text = logs(tmp_path)
    assert "could not chdir to" in text
    assert "cwd /tmp" in text


def test_layout_over_two_nodes() -> None:
    nodes = allocation({"a": (0, 1, 2, 3), "b": (4, 5)})
    assert [(s.rank, s.node, s.node_rank, s.local_rank, s.gpus) for s in task_layout(nodes)] == [
        (0, "a", 0, 0, (0, 1, 2, 3)),
        (1, "a", 0, 1, (0, 1, 2, 3)),
        (2, "a", 0, 2, (0, 1, 2, 3)),
        (3, "a", 0, 3, (0, 1, 2, 3)),
        (4, "b", 1, 0, (4, 5)),
        (5, "b", 1, 1, (4, 5)),
    ]
    assert tasks_per_node([n.ntasks for n in nodes]) == "4,2"
    assert tasks_per_node([8, 8, 8, 1]) == "8(x3),1"
    master, decoded = decode_allocation(encode_allocation(nodes, "10.0.0.1"))
    assert (master, decoded) == ("10.0.0.1", nodes)


def test_cpu_counts_are_the_cores_booked_on_each_node() -> None:
    """``--exclusive`` books every core of its nodes: the batch step says so as sbatch does
    (16 on a 16-core node, and a task per core when no task count was given); a job that
    booked fewer cores than its tasks use counts its tasks' CPUs, as before."""
    whole = allocation({"a": (0, 1), "b": (0, 1)}, ntasks_per_node=1, cpus_per_node=16)
    untold = batch_env(whole, tasks_given=False)
    assert (untold["SLURM_CPUS_ON_NODE"], untold["SLURM_JOB_CPUS_PER_NODE"]) == ("16", "16(x2)")
    assert untold["SLURM_TASKS_PER_NODE"] == "16(x2)"
    told = batch_env(allocation({"a": (0,)}, ntasks_per_node=2, cpus_per_node=16), 4)
    assert (told["SLURM_CPUS_ON_NODE"], told["SLURM_TASKS_PER_NODE"]) == ("16", "2")
    few = batch_env(allocation({"a": (0,)}, ntasks_per_node=2, cpus_per_node=2), 3)
    assert (few["SLURM_CPUS_ON_NODE"], few["SLURM_JOB_CPUS_PER_NODE"]) == ("6", "6")
    assert decode_allocation(encode_allocation(whole, "10.0.0.1"))[1] == whole


def test_batch_job_is_one_process_on_the_first_node(tmp_path: Path) -> None:
    job = spec(
        tmp_path,
        ("job.sh",),
        workers=2,
        gpus_per_worker=2,
        placement={"a": (0, 1), "b": (0, 1)},
        batch=True,
    )
    assert [(s.rank, s.node, s.gpus) for s in rank_layout(job)] == [(0, "a", (0, 1))]


@pytest.mark.parametrize(
    ("pattern", "fields", "expected"),
    [
        ("slurm-%j.out", {"j": "24"}, "slurm-24.out"),
        ("slurm-%A_%a.out", {"j": "25", "A": "24", "a": "3"}, "slurm-24_3.out"),
        (
            "%x-%u-%N-%n-%t-%s-%J-%%-%5j",
            {"j": "24", "x": "wrap", "u": "bob"},
            "wrap-bob-vm-0-0-batch-24-%-00024",
        ),
        ("p-%A-%a", {"j": "24"}, "p-24-4294967294"),  # sbatch 22.05 on a job that is no array
    ],
)
def test_filename_patterns_as_sbatch(pattern: str, fields: dict[str, str], expected: str) -> None:
    """Checked against sbatch 22.05: -o 'pat-%A-%a-%j-%x-%u-%N-%n-%t-%s-%J-%%-%5j.out' gave
    pat-24-4294967294-24-wrap-rycmp-vm-0-0-batch-24-%-00024.out."""
    assert expand_pattern(pattern, fields, node="vm") == expected


@pytest.mark.parametrize(
    ("placement", "message"),
    [({"elsewhere": (0,)}, "this is n0"), ({NODE: (7,)}, r"GPUs \[7\] not on a 4-GPU node")],
)
def test_start_rejects_what_the_node_lacks(
    make_executor: MakeExecutor, tmp_path: Path, placement: dict[str, tuple[int, ...]], message: str
) -> None:
    job = spec(tmp_path, ("true",), gpus_per_worker=1, placement=placement)
    with pytest.raises(ExecutorError, match=message):
        make_executor(gpus=4).start(job)


def test_unknown_account_is_refused(make_executor: MakeExecutor, tmp_path: Path) -> None:
    job = spec(tmp_path, ("true",), user="no-such-user-railyard")
    with pytest.raises(ExecutorError, match="no Unix account 'no-such-user-railyard'"):
        make_executor(gpus=0).start(job)
