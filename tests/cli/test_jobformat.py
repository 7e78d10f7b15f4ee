"""squeue's -o and sacct's --format over job records, as scripts parse them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from railyard.cli.history import exit_code
from railyard.cli.jobformat import (
    SQUEUE_DEFAULT,
    format_of_fields,
    sacct_fields,
    sacct_table,
    squeue_lines,
)


def job(**fields: Any) -> Any:
    record = {
        "id": "7", "name": "train", "state": "running", "reason": "Fits", "queue": "gpu",
        "user": "alice", "gpus": 8, "workers": 8, "gpus_per_worker": 1, "priority": 100,
        "placement": {"gpu001": [0, 1, 2, 3], "gpu002": [0, 1, 2, 3]}, "command": ["sleep", "9"],
        "workdir": "/home/alice", "walltime_s": 3600.0, "array_parent": None,
        "array_index": None, "submit_t_s": 0.0, "start_t_s": 0.0, "end_t_s": None,
        "elapsed_s": 65.0, "restart_count": 0, "exit_code": None, "signal": None,
    }  # fmt: skip
    return record | fields


def test_squeues_default_format_lines_up_as_squeue_prints_it() -> None:
    pending = job(id="8_3", array_parent="8", array_index=3, name="sweep-long-name",
                  state="pending", placement=None, reason="Priority", elapsed_s=None)  # fmt: skip
    assert squeue_lines(SQUEUE_DEFAULT, [job(), pending]) == [
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)",
        "                 7       gpu    train    alice  R       1:05      2 gpu001,gpu002",
        "               8_3       gpu sweep-lo    alice PD       0:00      1 (Priority)",
    ]


def test_squeue_letters_and_a_literal_percent() -> None:
    [_, line] = squeue_lines("%i|%T|%t|%l|%L|%b|%F|%K|%r|100%%", [job()])
    assert line == "7|RUNNING|R|1:00:00|58:55|gres/gpu:4|7|N/A|None|100%"  # squeue: None
    [_, done] = squeue_lines("%4i|%t|%l", [job(state="timeout", walltime_s=None)])
    assert done == "7   |TO|UNLIMITED"
    [_, ends] = squeue_lines("%e", [job(start_t_s=1_000_000.0)])  # running: when its limit is
    assert ends == datetime.fromtimestamp(1_003_600.0).isoformat(timespec="seconds")
    [_, waits] = squeue_lines("%r", [job(state="pending", placement=None, reason="Priority")])
    assert waits == "Priority"


def test_an_unknown_squeue_letter_is_one_line_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"^--format: unknown field %z \(hint: one of %i %A "):
        squeue_lines("%i %z", [job()])


def test_squeue_s_account_qos_cpus_memory_and_dependency_letters() -> None:
    """What SQUEUE_FORMAT lines of real sites ask: the account (the queue here), the QOS (the
    priority class, before nice), CPUs (tasks x CPUs per task), memory per node, nice."""
    niced = job(priority=95, nice=5, cpus_per_task=4, ntasks_per_node=2, workers=2,
                mem_per_node_mb=16384, dependency="afterok:3", never_nodes=["gpu009"])  # fmt: skip
    [head, line] = squeue_lines("%a|%q|%C|%c|%m|%y|%E|%x|%B|%n", [niced])
    assert head.split("|") == ["ACCOUNT", "QOS", "CPUS", "MIN_CPUS", "MIN_MEMORY", "NICE",
                               "DEPENDENCY", "EXC_NODES", "EXEC_HOST", "REQ_NODES"]  # fmt: skip
    assert line == "gpu|low|16|4|16384M|5|afterok:3|gpu009|gpu001|"
    [_, plain] = squeue_lines("%q|%C|%m|%E|%B", [job(priority=500, placement=None)])
    assert plain == "normal|8|0|(null)|n/a"
    assert format_of_fields("Account,QOS:.6,NumCPUs:4") == "%20a%.6q%4C"


def test_sacct_format_widths_cuts_and_parsable() -> None:
    ended = job(state="failed", exit_code=3, elapsed_s=3725.0)
    assert sacct_table(
        "JobID,JobName%4,State,ExitCode,Elapsed", [ended], exit_code, parsable=False
    ) == [
        "       JobID JobN      State ExitCode    Elapsed",
        "------------ ---- ---------- -------- ----------",
        "           7 tra+     FAILED      3:0   01:02:05",
    ]
    assert sacct_table("jobid,state,exitcode", [ended], exit_code, parsable=True) == [
        "JobID|State|ExitCode",
        "7|FAILED|3:0",
    ]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ("JobID,Foo", "--format: unknown field 'Foo' (hint: e.g. JobID,JobName%30,State; "),
        ("JobName%x", "--format: unknown width 'x' of JobName (hint: "),
    ],
)
def test_a_bad_sacct_format_is_one_line(fields: str, error: str) -> None:
    with pytest.raises(ValueError, match="^" + error.replace("(", r"\(")):
        sacct_table(fields, [job()], exit_code, parsable=False)


def test_squeue_field_names_are_its_letters_padded_to_twenty() -> None:
    """squeue -O: each field 20 wide unless NAME:[.]WIDTH; an unknown name is one line."""
    assert format_of_fields("JobID,name:.5,ReasonList") == "%20i%.5j%20R"
    with pytest.raises(ValueError, match=r"^--Format: unknown field 'Bogus' \(hint: "):
        format_of_fields("JobID,Bogus")


def test_sacct_s_default_columns_and_cpu_time() -> None:
    """sacct's own default format (JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode)
    reads; CPUTime is elapsed x the CPUs allocated; a job not started has none allocated."""
    ended = job(state="completed", exit_code=0, elapsed_s=100.0, cpus_per_task=2)
    fields = "JobID,Partition,Account,AllocCPUS,CPUTime,CPUTimeRAW,ReqTRES,QOS,NTasks"
    [_, row] = sacct_table(fields, [ended], exit_code, parsable=True)
    assert row == "7|gpu|gpu|16|00:26:40|1600|cpu=16,node=2,gres/gpu=8|low|8"
    script = job(ntasks_per_node=1, batch=True, gpus=2, workers=2)  # sbatch --gpus 2: 1 task
    [_, row] = sacct_table("NTasks,AllocCPUS", [script], exit_code, parsable=True)
    assert row == "2|2"  # one task on each of its two nodes
    [_, row] = sacct_table("NTasks,AllocCPUS", [script | {"placement": {"gpu001": [0, 1]}}],
                           exit_code, parsable=True)  # fmt: skip
    assert row == "1|1"
    waiting = job(state="pending", start_t_s=None, placement=None, elapsed_s=None)
    [_, row] = sacct_table("AllocCPUS,ReqCPUS,ElapsedRaw,TimelimitRaw", [waiting], exit_code,
                           parsable=True)  # fmt: skip
    assert row == "0|8|0|60"


def test_sacct_s_job_id_raw_is_an_array_task_s_own_number() -> None:
    raw = sacct_fields(lambda _: "0:0")["jobidraw"][2]
    assert [raw({"id": i, "task_number": n}) for i, n in
            (("5_2", 7), ("5_2.batch", 7), ("5_2.extern", 7), ("9", 9), ("9.batch", None))] == [
        "7", "7.batch", "7.extern", "9", "9.batch"]  # fmt: skip
