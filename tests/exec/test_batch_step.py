"""A batch script runs once, on the first node, with sbatch's environment, and its ``srun``
starts the tasks of the allocation (real processes through the LocalExecutor)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from exec_helpers import NODE, MakeExecutor, logs, spec, wait_for, wait_report

from railyard.exec import LaunchSpec, Outcome
from railyard.exec.task.launch import NodeAlloc
from railyard.exec.task.srun import SrunError, on_nodes, parse, plan

DUMP = (
    "import json, os, sys; d = sys.argv[1]; "
    "name = 'task-' + os.environ['SLURM_STEP_ID'] + '-' + os.environ['SLURM_PROCID'] "
    "if 'SLURM_STEP_ID' in os.environ else 'batch'; "
    "open(os.path.join(d, name + '.json'), 'w').write(json.dumps(dict(os.environ)))"
)


def batch(tmp_path: Path, body: str, **extra: Any) -> LaunchSpec:
    """A batch job on 4 GPUs of this node whose script is ``body``."""
    extra.setdefault("workers", 1)
    extra.setdefault("gpus_per_worker", 4)
    extra.setdefault("gpus", (0, 1, 2, 3))
    script_path = tmp_path / "job" / "script.sh"
    return spec(
        tmp_path,
        (str(script_path),),
        batch=True,
        script="#!/bin/bash\n" + body,
        script_path=script_path,
        steps_dir=tmp_path / "job" / "steps",
        job_env={"SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "demo"},
        **extra,
    )


def load(tmp_path: Path, name: str) -> dict[str, str]:
    data: dict[str, str] = json.loads((tmp_path / f"{name}.json").read_text())
    return data


def dump_command(tmp_path: Path) -> str:
    return f'{sys.executable} -c "{DUMP}" {tmp_path}'


def test_script_runs_once_and_srun_starts_one_task_per_gpu(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    dump = dump_command(tmp_path)
    executor = make_executor(gpus=4)
    stale = {"RANK": "7", "WORLD_SIZE": "9", "SLURM_NTASKS": "9", "RAILYARD_ALLOCATION": "{}"}
    body = f"{dump}\nsrun {dump}\nsrun --ntasks-per-node=1 {dump}\n"
    job = batch(tmp_path, body, env=stale)  # submitted from inside another job
    handle = executor.start(job)
    assert len(handle.workers) == 1  # the batch step only
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    shell = load(tmp_path, "batch")
    assert shell["ENVIRONMENT"] == "BATCH"
    assert shell["SLURM_JOB_ID"] == "42"
    assert (shell["SLURM_PROCID"], shell["SLURM_LOCALID"], shell["SLURM_NODEID"]) == ("0",) * 3
    assert shell["SLURM_NTASKS"] == shell["SLURM_NTASKS_PER_NODE"] == "4"
    assert shell["SLURM_JOB_NODELIST"] == shell["SLURMD_NODENAME"] == NODE
    assert shell["SLURM_NNODES"] == shell["SLURM_JOB_NUM_NODES"] == "1"
    assert shell["SLURM_GPUS_ON_NODE"] == "4"
    assert shell["CUDA_VISIBLE_DEVICES"] == shell["SLURM_JOB_GPUS"] == "0,1,2,3"
    assert "RANK" not in shell  # no task wiring in the shell, nor a parent job's
    assert "WORLD_SIZE" not in shell
    assert "MASTER_PORT" not in shell
    assert shell["PATH"].split(":")[0] == str(tmp_path / "logs" / "job" / "bin")
    tasks = [load(tmp_path, f"task-0-{r}") for r in range(4)]
    assert len({t["MASTER_PORT"] for t in tasks}) == 1
    pids = {t["SLURM_TASK_PID"] for t in tasks}  # each task's own, as srun's (not the shell's)
    assert len(pids) == 4
    assert shell["SLURM_TASK_PID"] not in pids
    for rank, env in enumerate(tasks):
        assert env["SLURM_PROCID"] == env["RANK"] == env["SLURM_LOCALID"] == env["LOCAL_RANK"]
        assert env["RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["SLURM_NTASKS"] == env["SLURM_STEP_NUM_TASKS"] == "4"
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
        assert int(env["LOCAL_RANK"]) < len(env["CUDA_VISIBLE_DEVICES"].split(","))
        assert env["SLURM_STEP_ID"] == env["SLURM_STEPID"] == "0"
        assert env["SLURM_JOB_ID"] == "42"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["NODE_RANK"] == env["SLURM_NODEID"] == "0"
    one = load(tmp_path, "task-1-0")
    assert one["SLURM_STEP_ID"] == "1"  # the second srun is the job's second step
    assert one["WORLD_SIZE"] == one["LOCAL_WORLD_SIZE"] == one["SLURM_STEP_NUM_TASKS"] == "1"
    assert one["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert not (tmp_path / "task-1-1.json").exists()


def test_a_failing_task_stops_the_step_and_srun_exits_with_its_code(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """Rank 1 exits 3; srun terminates the others and exits 3; the script goes on (as with
    Slurm, the shell decides what a failed step means) and here exits with srun's code."""
    task = (
        "import os, sys, time; r = int(os.environ['RANK']); "
        "sys.exit(3) if r == 1 else time.sleep(60)"
    )
    executor = make_executor(gpus=4)
    executor.start(batch(tmp_path, f'srun {sys.executable} -c "{task}"\nexit $?\n'))
    report = wait_report(executor, "job")
    assert (report.outcome, report.exit_code) == (Outcome.FAILED, 3)
    assert "srun: error: n0: task 1: Exited with exit code 3" in logs(tmp_path)


def test_with_k0_the_other_tasks_run_on_and_srun_exits_with_the_highest_code(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """``srun -K0`` (Slurm's own default): a failed task stops nobody; srun waits for all and
    exits with the highest code."""
    task = (
        "import os, sys, time; r = int(os.environ['RANK']); time.sleep(0.5 * r); "
        "print('done', r, flush=True); sys.exit({0: 2, 1: 5}.get(r, 0))"
    )
    executor = make_executor(gpus=4)
    executor.start(batch(tmp_path, f'srun -K0 {sys.executable} -c "{task}"\nexit $?\n'))
    report = wait_report(executor, "job")
    assert (report.outcome, report.exit_code) == (Outcome.FAILED, 5)
    text = logs(tmp_path)
    assert sorted(line for line in text.splitlines() if line.startswith("done")) == [
        f"done {r}" for r in range(4)
    ]
    assert "Killed by signal" not in text


def test_preempt_signal_reaches_the_tasks_not_the_batch_shell(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """Slurm's --signal without B:: the tasks get SIGUSR1 and checkpoint; the shell goes on
    after srun returns; the job counts as preempted (all exited 0 after the signal)."""
    task = (
        "import os, signal, sys, time; d = sys.argv[1]; "
        "signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0)); "
        "open(os.path.join(d, 'ready-' + os.environ['RANK']), 'w').close(); time.sleep(60)"
    )
    executor = make_executor(gpus=2)
    body = f'srun {sys.executable} -c "{task}" {tmp_path}\necho "after srun"\n'
    executor.start(batch(tmp_path, body, workers=2, gpus_per_worker=1, gpus=(0, 1)))
    wait_for(lambda: all((tmp_path / f"ready-{r}").exists() for r in (0, 1)))
    executor.request_checkpoint_stop("job", grace_s=30)
    report = wait_report(executor, "job")
    assert report.outcome == Outcome.PREEMPTED
    assert "after srun" in logs(tmp_path)


def test_b_signal_reaches_the_batch_shell_alone(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """Slurm's --signal=B:USR1: the usual ``trap ... USR1; python train.py & wait`` pattern.
    The shell's trap runs; the python it started in the background is not signalled and
    finishes; every process exits 0 (the control plane then counts it completed: no stop was
    asked, see sched.lifecycle.settle)."""
    child = (
        "import os, sys, time; open(os.path.join(sys.argv[1], 'ready'), 'w').close(); "
        "time.sleep(2); print('child done', flush=True)"
    )
    body = (
        "trap 'echo shell got USR1' USR1\n"
        f'{sys.executable} -c "{child}" {tmp_path} &\n'
        "wait; wait\necho shell exits\n"
    )
    executor = make_executor(gpus=1)
    executor.start(batch(tmp_path, body, gpus_per_worker=1, gpus=(0,), signal_batch_shell=True))
    wait_for(lambda: (tmp_path / "ready").exists())
    executor.signal("job", None)
    report = wait_report(executor, "job")
    text = logs(tmp_path)
    assert "shell got USR1" in text
    assert "child done" in text
    assert "shell exits" in text
    assert (report.outcome, report.exit_code) == (Outcome.PREEMPTED, 0)


def test_srun_outside_a_batch_script_and_bad_requests(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    executor = make_executor(gpus=2)
    body = "srun --nodes=2 true; echo nodes=$?\nsrun; echo empty=$?\nsrun --mpi=pmix true\n"
    executor.start(batch(tmp_path, body, workers=2, gpus_per_worker=1, gpus=(0, 1)))
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    text = logs(tmp_path)
    assert "srun: error: --nodes=2, but the job has 1 node(s)" in text
    assert "nodes=2" in text
    assert "srun: error: nothing to run" in text
    assert "empty=2" in text
    assert "srun: note: --mpi=pmix ignored" in text


def allocated() -> list[NodeAlloc]:
    return [NodeAlloc("a", 0, (0, 1), 2, 0), NodeAlloc("b", 1, (0, 1), 2, 2)]


@pytest.mark.parametrize(
    ("argv", "counts"),
    [
        ([], [("a", 2), ("b", 2)]),
        (["-N", "1"], [("a", 2)]),
        (["--ntasks-per-node=1"], [("a", 1), ("b", 1)]),
        (["-n", "3"], [("a", 2), ("b", 1)]),
        (["-n1"], [("a", 1)]),
        (["-N", "2", "-n", "2"], [("a", 1), ("b", 1)]),
        (["-O", "-N", "1", "-n", "3"], [("a", 3)]),  # --overcommit: more tasks than CPUs
    ],
)
def test_srun_plans_a_step_within_the_allocation(
    argv: list[str], counts: list[tuple[str, int]]
) -> None:
    args, _ = parse([*argv, "python", "train.py"])
    assert args.command == ["python", "train.py"]
    nodes = plan(args, allocated())
    assert [(n.name, n.ntasks) for n in nodes] == counts
    assert [n.first_task for n in nodes] == [
        sum(c for _, c in counts[:i]) for i in range(len(nodes))
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-N", "3"], "--nodes=3, but the job has 2 node(s)"),
        (["-n", "3", "--ntasks-per-node", "2"], "--ntasks=3 but --ntasks-per-node=2"),
        (["-N", "2", "-n", "1"], "--ntasks=1 is fewer than --nodes=2"),
        (["-n", "0"], "--ntasks must be >= 1"),
        (["--ntasks-per-node", "3"], "More processors requested than permitted (3 task(s)"),
        (["-N", "1", "-n", "3"], "More processors requested than permitted (3 task(s)"),
    ],
)
def test_srun_refuses_what_the_allocation_cannot_hold(argv: list[str], message: str) -> None:
    args, _ = parse([*argv, "true"])
    with pytest.raises(SrunError, match=re.escape(message)):
        plan(args, allocated())


def test_srun_keeps_the_command_options_for_the_command() -> None:
    argv = ["-l", "--kill-on-bad-exit=0", "--mem", "1G", "-c", "2", "--exclusive", "-J", "s",
            "python", "-u", "-c", "x", "-n", "5"]  # fmt: skip
    args, notes = parse(argv)
    assert args.command == ["python", "-u", "-c", "x", "-n", "5"]
    assert (args.ntasks, args.cpus_per_task, args.label) == (None, 2, True)
    assert args.kill_on_bad_exit == 0
    assert notes == [
        "--mem 1G ignored: a step shares its job's memory limit",
        "--exclusive ignored: steps at once already get different GPUs; CPUs are the job's",
        "-J s ignored: a step has its job's name",
    ]
    assert parse(["-K", "true"])[0].kill_on_bad_exit == 1
    with pytest.raises(SrunError, match="--multi-prog is not supported: one command per step"):
        parse(["--multi-prog", "tasks.conf"])


def test_srun_s_files_cpus_nodes_and_noted_options_in_a_script(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """What real scripts pass to srun: ``-o/-e`` per task (``%t``, ``%s``, ``%j``), ``-i
    none``, ``-c``, ``-w`` of the allocation's node, ``--exclusive`` (noted); an unknown node
    or ``--multi-prog`` is one line, exit 2."""
    out = tmp_path / "files"
    out.mkdir()
    body = (
        f"cd {out}\n"
        "srun -n 2 -o step%s-%t.out -e %j-%t.err sh -c 'echo out $SLURM_PROCID; echo err >&2'\n"
        "srun -n 1 -i none -o in.out cat\n"
        "printf 'line\\n' > input.txt\n"
        "srun -n 2 -O -i input.txt -o read-%t.out cat\n"
        "srun -c 1 -n 1 -w n0 --exclusive sh -c 'echo cpus=$SLURM_CPUS_PER_TASK'\n"
        "srun -w elsewhere true; echo w=$?\n"
        "srun --multi-prog tasks.conf; echo m=$?\n"
    )
    executor = make_executor(gpus=4)
    executor.start(batch(tmp_path, body))  # job 42
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED, logs(tmp_path)
    assert [(out / f"step0-{t}.out").read_text() for t in (0, 1)] == ["out 0\n", "out 1\n"]
    assert (out / "42-1.err").read_text() == "err\n"
    assert (out / "in.out").read_text() == ""  # stdin was /dev/null: cat ended at once
    assert [(out / f"read-{t}.out").read_text() for t in (0, 1)] == ["line\n", "line\n"]
    text = logs(tmp_path)
    assert "cpus=1" in text
    assert "srun: note: --exclusive ignored: steps at once already get different GPUs" in text
    assert "--nodelist=elsewhere: elsewhere is not in this job's allocation" in text
    codes = [line for line in text.splitlines() if line[:2] in ("w=", "m=")]
    assert codes == ["w=2", "m=2"]


def test_srun_w_takes_names_or_a_hostlist_of_the_allocation() -> None:
    nodes = allocated()
    names = [n.name for n in nodes]
    assert [n.name for n in on_nodes(nodes, names[1])] == [names[1]]
    assert [n.name for n in on_nodes(nodes, ",".join(reversed(names)))] == names  # its order
    with pytest.raises(SrunError, match=r"--nodelist=gpu\[1: unclosed"):
        on_nodes(nodes, "gpu[1")
    with pytest.raises(SrunError, match="gpu9 is not in this job's allocation"):
        on_nodes(nodes, "gpu9")
