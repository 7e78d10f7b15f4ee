"""Slurm's views as railyard spells them (issue 57): sacct's .batch/.extern step rows,
``scontrol show job N``'s Key=Value lines, ``sinfo -N -l``'s node list; and sbatch reading a
script from stdin; against a real server."""

from __future__ import annotations

import io
import re
import sys
import time
from pathlib import Path

import pytest
from tests.control.test_cli_client import Cli, cli, server

from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, NodeRow, QueueRow

__all__ = ["cli", "server"]  # the fixtures, used by name


def _set(store: Store, job_id: str, **values: object) -> None:
    with store.session() as session:
        row = session.get(JobRow, job_id)
        assert row is not None
        for key, value in values.items():
            setattr(row, key, value)


def test_history_lists_batch_and_extern_steps_as_sacct(
    cli: Cli, store: Store, tmp_path: Path
) -> None:
    """sacct 22.05 prints ``N.batch`` (a batch script's shell) and ``N.extern`` under each job
    that got nodes, ``N.extern`` then ``N.0`` under an srun-like command job; a cancelled
    job's batch step is CANCELLED 0:15, a failed one's carries the exit code; a job killed by
    SIGKILL is 0:9; -X lists the jobs alone, and a job that never started has no step."""
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\nexit 3\n")
    now = time.time()
    ran = {"start_t_s": now - 60, "end_t_s": now - 30, "placement": {"n01": [0]}}
    failed = cli("alice", "submit", "--parsable", "-J", "fails", str(script)).stdout.strip()
    _set(store, failed, state="failed", exit_code=3, **ran)
    cancelled = cli("alice", "submit", "--parsable", "-J", "stop", str(script)).stdout.strip()
    _set(store, cancelled, state="cancelled", exit_code=None, **ran)
    command = cli("alice", "submit", "--parsable", "-J", "cmd", "--", "true").stdout.strip()
    _set(store, command, state="failed", exit_code=None, exit_signal="SIGKILL", **ran)
    waiting = cli("alice", "submit", "--parsable", "-J", "wait", "--", "true").stdout.strip()
    listed = cli("alice", "history", "-n", "-P", "-o", "JobID,JobName,State,ExitCode")
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines() == [
        f"{failed}|fails|FAILED|3:0",
        f"{failed}.batch|batch|FAILED|3:0",
        f"{failed}.extern|extern|COMPLETED|0:0",
        f"{cancelled}|stop|CANCELLED|0:0",
        f"{cancelled}.batch|batch|CANCELLED|0:15",
        f"{cancelled}.extern|extern|COMPLETED|0:0",
        f"{command}|cmd|FAILED|0:9",
        f"{command}.extern|extern|COMPLETED|0:0",
        f"{command}.0|cmd|FAILED|0:9",
        f"{waiting}|wait|PENDING|",
    ]
    alone = cli("alice", "history", "-X", "-n", "-P", "-o", "JobID,User")
    assert alone.stdout.splitlines() == [
        f"{j}|alice" for j in (failed, cancelled, command, waiting)
    ]
    columns = cli("alice", "history", "-j", failed, "-o", "JobID,User,Partition").stdout
    assert [line.split() for line in columns.splitlines()[2:]] == [
        [failed, "alice", "default"],
        [f"{failed}.batch"],  # a step has no user and no partition
        [f"{failed}.extern"],
    ]


def test_show_job_n_prints_scontrols_key_value_lines(
    cli: Cli, store: Store, tmp_path: Path
) -> None:
    job_id = cli("alice", "submit", "--parsable", "-J", "train", "-t", "1:00:00", "-G", "2",
                 "--", "sleep", "9").stdout.strip()  # fmt: skip
    start = time.time() - 65
    _set(store, job_id, state="running", start_t_s=start, placement={"n01": [0, 1]},
         reason="Fits (borrowing)")  # fmt: skip
    shown = cli("alice", "show", "job", job_id)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0] == f"JobId={job_id} JobName=train"
    assert all(line.startswith("   ") for line in lines[1:])
    command = [line.strip() for line in lines if line.strip().startswith("Command=")]
    assert command == ["Command=sleep 9"]  # the words of the command, as they are
    lines = [line for line in lines if not line.strip().startswith("Command=")]
    fields = dict(pair.split("=", 1) for line in lines for pair in line.split())
    assert fields["JobState"] == "RUNNING"
    assert fields["Reason"] == "None"  # a running job's, as scontrol
    assert (fields["NodeList"], fields["NumNodes"], fields["Partition"]) == ("n01", "1", "default")
    assert (fields["TimeLimit"], fields["BatchFlag"], fields["ExitCode"]) == (
        "01:00:00",
        "0",
        "0:0",
    )
    assert re.fullmatch(r"00:01:0\d", fields["RunTime"]), fields["RunTime"]
    assert "gres/gpu=2" in fields["TRES"]
    # ended: a failure says why, a completed job None; the QOS is its priority class
    _set(store, job_id, state="failed", end_t_s=time.time(), exit_code=3,
         reason="NonZeroExitCode", priority=1000 - 5, nice=5)  # fmt: skip
    failed = cli("alice", "show", "job", job_id).stdout
    assert "JobState=FAILED Reason=NonZeroExitCode " in failed
    assert " QOS=high" in failed
    _set(store, job_id, state="completed", exit_code=0, reason="Completed")
    assert "JobState=COMPLETED Reason=None " in cli("alice", "show", "job", job_id).stdout
    assert cli("alice", "show", job_id).stdout.startswith("id ")  # railyard's own view stays
    # a batch script's output as scontrol shows it: the pattern filled in, under its WorkDir
    script = tmp_path / "tasks.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH -o logs/%x-%A_%a.out\n#SBATCH -e /tmp/%u-%j.err\ntrue\n"
    )
    array = cli("alice", "submit", "--parsable", "-J", "sweep", "--array", "3-4", "-H",
                "-D", str(tmp_path), str(script)).stdout.strip()  # fmt: skip
    task = dict(pair.split("=", 1) for line in cli("alice", "show", "job", f"{array}_4")
                .stdout.splitlines() for pair in line.split() if "=" in pair)  # fmt: skip
    assert task["WorkDir"] == str(tmp_path)
    assert task["StdOut"] == f"{tmp_path}/logs/sweep-{array}_4.out"
    raw = cli("alice", "history", "-j", f"{array}_4", "-o", "JobIDRaw", "-n").stdout.split()
    [own] = raw  # sacct's JobIDRaw: the task's own number, its SLURM_JOB_ID (held: no steps)
    assert own.isdigit()
    assert task["StdErr"] == f"/tmp/{task['UserId'].split('(')[0]}-{own}.err"
    wrong = cli("alice", "show", "job", "x", "y")
    assert wrong.exit_code == 2
    assert cli("alice", "show", "7", "8").stderr.startswith("railyard: show: one job id")


def test_nodes_long_is_sinfos_node_list(cli: Cli, store: Store) -> None:
    """``sinfo -N -l``: the time, then NODELIST ... REASON, a line per node and partition; a
    queue with sub-queues is no partition, the default one is starred; a user sees the
    partitions of their queues."""
    with store.session() as session:
        for name in ("gpu", "debug"):
            session.add(QueueRow(name=name, parent="default", nominal_gpus={},
                                 is_default=name == "gpu", created_t_s=time.time()))  # fmt: skip
        node = session.get(NodeRow, "n02")
        assert node is not None
        node.cpu_cores, node.mem_gb, node.state, node.reason = 64, 500.0, "draining", "bad fan"
    job_id = cli("alice", "submit", "--parsable", "-G", "3", "--", "x").stdout.strip()
    _set(store, job_id, state="running", start_t_s=time.time(), placement={"n01": [0, 1, 2]})
    listed = cli("alice", "nodes", "-N", "-l")
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", lines[0]), lines[0]
    assert lines[1].split() == ["NODELIST", "NODES", "PARTITION", "STATE", "CPUS", "S:C:T",
                                "MEMORY", "TMP_DISK", "WEIGHT", "AVAIL_FE", "REASON"]  # fmt: skip
    rows = [line.split(None, 10) for line in lines[2:]]
    assert [r[:4] for r in rows] == [
        ["n01", "1", "debug", "mixed"], ["n01", "1", "gpu*", "mixed"],
        ["n02", "1", "debug", "drained"], ["n02", "1", "gpu*", "drained"],
    ]  # fmt: skip
    assert rows[2][4:] == ["64", "N/A", "512000", "0", "1", "(null)", "bad fan"]
    assert lines[1].index("NODES") + len("NODES") == lines[2].index(" 1 ") + 2  # right-aligned


def test_submit_reads_a_script_piped_to_it(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sbatch <<EOF``: no script named, the script comes on stdin (named ``sbatch``, as
    Slurm names it, unless it says -J); an empty stdin is one line, exit 2."""

    def piped(text: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))

    piped(b"#!/bin/bash\n#SBATCH -J piped\n#SBATCH -t 5\necho hi\n")
    named = cli("alice", "submit", "--parsable").stdout.strip()
    piped(b"#!/bin/bash\necho hi\n")
    plain = cli("alice", "submit", "--parsable").stdout.strip()
    rows = {j["id"]: j for j in cli.json("alice", "queue", "-t", "all")}
    assert (rows[named]["name"], rows[named]["walltime_s"]) == ("piped", 300)
    assert rows[plain]["name"] == "sbatch"
    piped(b"  \n")
    empty = cli("alice", "submit")
    assert (empty.exit_code, empty.stderr.split(" (")[0]) == (
        2,
        "railyard: nothing to run: stdin is empty",
    )


def test_squeue_name_and_sacct_brief_parsable_and_partition(cli: Cli, store: Store) -> None:
    """``squeue -n``, ``sacct -b`` (JobID, State, ExitCode), ``-p`` (each line ends with a
    "|"), ``-r`` (a partition's jobs) and ``-a`` (taken: a user sees their own)."""
    one = cli("alice", "submit", "--parsable", "-J", "one", "--", "true").stdout.strip()
    two = cli("alice", "submit", "--parsable", "-J", "two", "--", "true").stdout.strip()
    named = cli("alice", "queue", "-h", "-n", "two,three", "-o", "%i")
    assert named.stdout.split() == [two]
    _set(store, one, state="failed", exit_code=3, start_t_s=time.time() - 5,
         end_t_s=time.time(), placement={"n01": []})  # fmt: skip
    brief = cli("alice", "history", "-b", "-X", "-j", one, "-a").stdout.splitlines()
    assert brief[0].split() == ["JobID", "State", "ExitCode"]
    assert brief[2].split() == [one, "FAILED", "3:0"]
    parsable = cli("alice", "history", "-p", "-X", "-j", one, "-o", "JobID,State")
    assert parsable.stdout.splitlines() == ["JobID|State|", f"{one}|FAILED|"]
    assert cli("alice", "history", "-r", "nosuchqueue", "-X", "-P", "-n").stdout.strip() == ""


def test_show_job_of_an_array_prints_each_task_as_scontrol(cli: Cli) -> None:
    """``scontrol show job 12``: a record per task, each ``JobId=<its own number>
    ArrayJobId=12 ArrayTaskId=<index>``; ``show job 12_1`` that task's alone."""
    array = cli("alice", "submit", "--parsable", "--array", "0-1", "--", "true").stdout.strip()
    shown = cli("alice", "show", "job", array)
    assert shown.exit_code == 0, shown.output
    firsts = [block.splitlines()[0] for block in shown.stdout.strip().split("\n\n")]
    own = {j["id"]: j["task_number"] for j in cli.json("alice", "queue", "-j", array)}
    assert firsts == [
        f"JobId={own[f'{array}_{i}']} ArrayJobId={array} ArrayTaskId={i} JobName=true"
        for i in (0, 1)
    ]
    one = cli("alice", "show", "job", f"{array}_1").stdout.splitlines()[0]
    assert one == firsts[1]


def test_update_array_task_throttle_as_scontrol(cli: Cli) -> None:
    """``scontrol update JobId=12 ArrayTaskThrottle=1``: the array's pending line says the
    new limit; a word that is no integer is bad input."""
    array = cli("alice", "submit", "--parsable", "-H", "--array", "0-3%2", "--", "x").stdout.strip()
    done = cli("alice", "update", f"JobId={array}", "ArrayTaskThrottle=1")
    assert (done.exit_code, done.stdout) == (0, f"{array} updated\n"), done.output
    assert cli("alice", "queue", "-h", "-o", "%i").stdout.split() == [f"{array}_[0-3%1]"]
    assert cli("alice", "update", array, "ArrayTaskThrottle=lots").exit_code == 2
