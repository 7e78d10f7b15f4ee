"""Slurm's own output formats over railyard's job records: squeue's ``-o "%.18i %.9P %j"``
and sacct's ``--format=JobID,JobName%30,State``, so scripts that parse them keep working.

squeue: ``%[.][WIDTH]LETTER``, left-justified unless ``.`` asks for right, cut to WIDTH as
squeue cuts. sacct: comma-separated field names (any case) with an optional ``%WIDTH``,
columns of width 10 by default (JobID 12, JobName 10, as sacct), or ``|``-separated with -P.
An unknown letter or field is one line naming it, with the known ones as the hint.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from railyard.cli.text import clock, squeue_time
from railyard.client.filenames import expand_pattern
from railyard.client.printable import printable
from railyard.client.values import qos_of

if TYPE_CHECKING:
    from railyard.client.wire import Job

Field = Callable[["Job"], str]

COMPACT = {"pending": "PD", "starting": "CF", "running": "R", "preempting": "CG",
           "cancelling": "CG", "completed": "CD", "failed": "F", "cancelled": "CA",
           "timeout": "TO", "node_fail": "NF", "deadline": "DL"}  # fmt: skip
"""squeue's %t: STARTING is Slurm's CONFIGURING, a job being stopped its COMPLETING."""
LONG_STATES = {"starting": "CONFIGURING", "preempting": "COMPLETING", "cancelling": "COMPLETING"}
"""squeue's %T and scontrol's JobState: the same states by Slurm's long names (a script that
waits for COMPLETING to pass never meets railyard's CANCELLING)."""


def shown_priority(job: Job) -> int:
    """A held pending job's priority is 0, as Slurm shows it (scripts read ``Priority=0`` as
    held); its class, what its QOS says, is kept for its release."""
    return 0 if job.get("hold") and job["state"] == "pending" else job["priority"]


def _time(t_s: float | None) -> str:
    return "N/A" if t_s is None else datetime.fromtimestamp(t_s).isoformat(timespec="seconds")


def _nodes(job: Job) -> str:
    return ",".join(job["placement"] or {})


def _node_count(job: Job) -> str:
    """Nodes it holds; 1 before it holds any (its record does not say how many it asks)."""
    return str(len(job["placement"] or {}) or 1)


def _limit(job: Job) -> str:
    return "UNLIMITED" if job["walltime_s"] is None else squeue_time(job["walltime_s"])


def _left(job: Job) -> str:
    if job["walltime_s"] is None:
        return "UNLIMITED"
    return squeue_time(max(0.0, job["walltime_s"] - (job["elapsed_s"] or 0.0)))


def _reason_or_nodes(job: Job) -> str:
    """%R: the nodes of a job that holds some, else its reason in parentheses."""
    return _nodes(job) if job["placement"] else f"({job['reason'] or 'None'})"


def _end_t_s(job: Job) -> float | None:
    """When it ended, or for a running job when its limit runs out (squeue's %e)."""
    start, limit = job["start_t_s"], job["walltime_s"]
    if job["end_t_s"] is None and job["placement"] and start is not None and limit is not None:
        return start + limit
    return job["end_t_s"]


def _used(job: Job) -> str:
    return squeue_time(job["elapsed_s"] or 0.0)


def task_count(job: Job) -> int:
    """Its tasks as the executor lays them out (``exec.task.launch.allocation``): its tasks
    per node on each node (a batch script: one), else a task per GPU, else per chunk."""
    per_node = job.get("ntasks_per_node")
    if isinstance(per_node, int) and per_node > 0:
        nodes = len(job["placement"] or {}) or (job["workers"] if job.get("distinct_nodes") else 1)
        return per_node * nodes
    return job["gpus"] or job["workers"]


def _cpus(job: Job) -> int:
    """The CPUs it asks (Slurm counts at least one per task)."""
    return task_count(job) * max(1, job.get("cpus_per_task") or 1)


def _memory(job: Job) -> str:
    """squeue's %m / sacct's ReqMem: memory per node, ``0`` when it asks none."""
    mb = job.get("mem_per_node_mb") or 0
    return f"{mb}M" if mb else "0"


def _array_index(job: Job) -> str:
    """squeue's %K: the task's index, or a folded line's indices (``17_[2-9%2]``: ``2-9%2``)."""
    _, bracket, rest = job["id"].partition("_[")
    if bracket:
        return rest.rstrip("]")
    return "N/A" if job["array_index"] is None else str(job["array_index"])


def _listed(nodes: list[str] | None) -> str:
    return ",".join(nodes or [])


SQUEUE: dict[str, Field] = {
    "i": lambda j: j["id"],
    "A": lambda j: j["id"],
    "F": lambda j: j["array_parent"] or j["id"],
    "K": _array_index,
    "j": lambda j: j["name"] or "-",
    "u": lambda j: j["user"],
    "P": lambda j: j["queue"],
    "T": lambda j: LONG_STATES.get(j["state"], j["state"].upper()),
    "t": lambda j: COMPACT.get(j["state"], j["state"].upper()),
    "M": _used,
    "l": _limit,
    "L": _left,
    "D": lambda j: _node_count(j),
    "R": _reason_or_nodes,
    "r": lambda j: "None" if j.get("placement") else j["reason"] or "None",  # running: None
    "N": _nodes,
    "b": lambda j: f"gres/gpu:{j['gpus'] // int(_node_count(j))}" if j["gpus"] else "N/A",
    "S": lambda j: _time(j["start_t_s"]),
    "V": lambda j: _time(j["submit_t_s"]),
    "e": lambda j: _time(_end_t_s(j)),
    "Q": lambda j: str(shown_priority(j)),
    "Z": lambda j: j["workdir"],
    "o": lambda j: " ".join(j["command"]),
    "C": lambda j: str(_cpus(j)),
    "c": lambda j: str(max(1, j.get("cpus_per_task") or 1)),
    "m": _memory,
    "a": lambda j: j["queue"],  # SLURM_JOB_ACCOUNT: quota and fair share are per queue
    "q": lambda j: qos_of(j["priority"], j.get("nice", 0)),
    "y": lambda j: str(j.get("nice", 0)),
    "E": lambda j: j.get("dependency") or "(null)",
    "n": lambda j: _listed(j.get("only_nodes")),
    "x": lambda j: _listed(j.get("never_nodes")),
    "B": lambda j: next(iter(j["placement"] or {}), "n/a"),
    "k": lambda j: "(null)",  # no --comment here
}
SQUEUE_DEFAULT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
"""squeue's own default format."""
SQUEUE_LONG = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
"""squeue -l's."""
SQUEUE_FIELDS = {
    "jobid": "i", "jobarrayid": "i", "arrayjobid": "F", "arraytaskid": "K", "name": "j",
    "username": "u", "partition": "P", "state": "T", "statecompact": "t", "timeused": "M",
    "timelimit": "l", "timeleft": "L", "numnodes": "D", "reasonlist": "R", "reason": "r",
    "nodelist": "N", "tres-per-node": "b", "starttime": "S", "submittime": "V",
    "endtime": "e", "priority": "Q", "prioritylong": "Q", "workdir": "Z", "command": "o",
    "numcpus": "C", "mincpus": "c", "minmemory": "m", "account": "a", "qos": "q", "nice": "y",
    "dependency": "E", "reqnodes": "n", "excnodes": "x", "batchhost": "B", "comment": "k",
}  # fmt: skip
"""squeue -O's field names (any case) as -o's letters."""
FIELD_WIDTH = 20  # squeue -O's width of a field without one


def format_of_fields(fields: str) -> str:
    """squeue ``-O JobID,Name:30,State:.10`` as the ``-o`` format that prints the same:
    each field padded to its width (20 unless ``:[.]WIDTH``; ``.`` right-justifies)."""
    out = []
    for item in (part.strip() for part in fields.split(",") if part.strip()):
        name, _, size = item.partition(":")
        letter = SQUEUE_FIELDS.get(name.lower())
        right, width = size.startswith("."), size.removeprefix(".")
        if letter is None or (width and not width.isdigit()):
            what = f"field {name!r}" if letter is None else f"width {size!r} of {name}"
            raise ValueError(f"--Format: unknown {what} (hint: NAME[:[.]WIDTH] of "
                             f"{','.join(SQUEUE_FIELDS)})")  # fmt: skip
        out.append(f"%{'.' if right else ''}{width or FIELD_WIDTH}{letter}")
    if not out:
        raise ValueError("--Format: no field (hint: e.g. -O JobID,Name,State)")
    return "".join(out)


def squeue_lines(fmt: str, jobs: list[Job]) -> list[str]:
    """squeue ``-o FORMAT``: a header line, then a line per job. ValueError: one line."""
    from railyard.cli.letterformat import letter_lines

    return letter_lines(fmt, jobs, SQUEUE, _SQUEUE_HEADERS, option="--format")


_SQUEUE_HEADERS = {"i": "JOBID", "A": "JOBID", "F": "ARRAY_JOB_ID", "K": "ARRAY_TASK_ID",
                   "j": "NAME", "u": "USER", "P": "PARTITION", "T": "STATE", "t": "ST",
                   "M": "TIME", "l": "TIME_LIMIT", "L": "TIME_LEFT", "D": "NODES",
                   "R": "NODELIST(REASON)", "r": "REASON", "N": "NODELIST", "b": "TRES_PER_NODE",
                   "S": "START_TIME", "V": "SUBMIT_TIME", "e": "END_TIME", "Q": "PRIORITY",
                   "Z": "WORK_DIR", "o": "COMMAND", "C": "CPUS", "c": "MIN_CPUS",
                   "m": "MIN_MEMORY", "a": "ACCOUNT", "q": "QOS", "y": "NICE",
                   "E": "DEPENDENCY", "n": "REQ_NODES", "x": "EXC_NODES", "B": "EXEC_HOST",
                   "k": "COMMENT"}  # fmt: skip


def sacct_fields(exit_code: Field) -> dict[str, tuple[str, int, Field]]:
    """sacct's field names (lower case) -> (header, default width, value)."""
    return {
        "jobid": ("JobID", 12, lambda j: j["id"]),
        "jobidraw": ("JobIDRaw", 12, _raw_id),
        "jobname": ("JobName", 10, lambda j: j["name"] or ""),
        "user": ("User", 9, lambda j: j["user"]),
        "partition": ("Partition", 10, lambda j: "" if "." in j["id"] else j["queue"]),
        "state": ("State", 10, lambda j: j["state"].upper()),
        "exitcode": ("ExitCode", 8, exit_code),
        "elapsed": ("Elapsed", 10, lambda j: clock(j["elapsed_s"]) or "00:00:00"),
        "timelimit": ("Timelimit", 10, lambda j: clock(j["walltime_s"]) or "UNLIMITED"),
        "start": ("Start", 19, lambda j: _time(j["start_t_s"]).replace("N/A", "Unknown")),
        "end": ("End", 19, lambda j: _time(j["end_t_s"]).replace("N/A", "Unknown")),
        "submit": ("Submit", 19, lambda j: _time(j["submit_t_s"])),
        "nnodes": ("NNodes", 8, _node_count),
        "nodelist": ("NodeList", 15, lambda j: _nodes(j) or "None assigned"),
        "alloctres": ("AllocTRES", 20, lambda j: f"gres/gpu={j['gpus']}" if j["gpus"] else ""),
        "restarts": ("Restarts", 8, lambda j: str(j["restart_count"])),
        "priority": ("Priority", 10, lambda j: str(j["priority"])),
        "workdir": ("WorkDir", 20, lambda j: j["workdir"]),
        "reason": ("Reason", 10, lambda j: j["reason"] or "None"),
        "account": ("Account", 10, lambda j: j["queue"]),
        "qos": ("QOS", 10, lambda j: qos_of(j["priority"], j.get("nice", 0))),
        "alloccpus": ("AllocCPUS", 10, lambda j: "0" if j["start_t_s"] is None else str(_cpus(j))),
        "ncpus": ("NCPUS", 10, lambda j: str(_cpus(j))),
        "reqcpus": ("ReqCPUS", 8, lambda j: str(_cpus(j))),
        "ntasks": ("NTasks", 8, lambda j: str(task_count(j))),
        "reqmem": ("ReqMem", 10, _memory),
        "reqtres": ("ReqTRES", 20, _req_tres),
        "elapsedraw": ("ElapsedRaw", 10, lambda j: str(int(j["elapsed_s"] or 0))),
        "cputime": ("CPUTime", 10, lambda j: clock(_cpu_s(j)) or "00:00:00"),
        "cputimeraw": ("CPUTimeRAW", 10, lambda j: str(int(_cpu_s(j)))),
        "timelimitraw": ("TimelimitRaw", 12, _limit_minutes),
        "reqnodes": ("ReqNodes", 8, _node_count),
        "comment": ("Comment", 10, lambda j: ""),
    }


def _cpu_s(job: Job) -> float:
    """sacct's CPUTime: elapsed time x the CPUs allocated."""
    return (job["elapsed_s"] or 0.0) * _cpus(job)


def _limit_minutes(job: Job) -> str:
    return "UNLIMITED" if job["walltime_s"] is None else str(int(job["walltime_s"] // 60))


def _req_tres(job: Job) -> str:
    """billing, cpu, mem, node and gres/gpu, as sacct spells a job's request."""
    parts = [f"cpu={_cpus(job)}"]
    if job.get("mem_per_node_mb"):
        parts.append(f"mem={_memory(job)}")
    parts.append(f"node={_node_count(job)}")
    if job["gpus"]:
        parts.append(f"gres/gpu={job['gpus']}")
    return ",".join(parts)


def _job_ids(job: Job) -> list[tuple[str, str]]:
    """scontrol's ids: an array task's JobId is its own number, then its array's id and its
    index (``JobId=13 ArrayJobId=12 ArrayTaskId=0``)."""
    parent, index = job["array_parent"], job["array_index"]
    if parent is None or index is None:
        return [("JobId", job["id"])]
    own = job.get("task_number")
    return [("JobId", str(own) if own is not None else job["id"]), ("ArrayJobId", parent),
            ("ArrayTaskId", str(index))]  # fmt: skip


def _scontrol_reason(job: Job) -> str:
    """scontrol's Reason: None for a job that runs or completed; why for one that waits or
    ended otherwise (NonZeroExitCode, TimeLimit)."""
    if job["state"] == "completed" or (job["placement"] and job["end_t_s"] is None):
        return "None"
    return job["reason"] or "None"


def _raw_id(job: Job) -> str:
    """sacct's JobIDRaw: an array task's own number (its SLURM_JOB_ID, ``7`` for ``5_2``),
    with its step's suffix (``7.batch``); any other job's id."""
    base, dot, step = job["id"].partition(".")
    number = job.get("task_number")
    if number is not None and "_" in base:
        base = str(number)
    return base + dot + step


STOPPED = ("cancelled", "timeout", "preempting", "cancelling", "deadline")
"""A job stopped from outside: its batch step was killed (sacct: CANCELLED, ``0:15``)."""


def steps(job: Job) -> list[Job]:
    """sacct's step rows under a job that got its nodes, as Slurm 22.05 (``PrologFlags=Contain``)
    prints them: ``N.batch`` for a batch script (its shell is the batch step), ``N.0`` for a
    command job's or ``railyard run``'s tasks (srun's first step), and ``N.extern`` for every
    allocation; ``railyard alloc``'s shell is no step (salloc's runs on the login node). A
    step row has no user and no partition (the partition field says so), and its job's
    account. Steps a batch script's ``srun`` starts inside the job are not recorded by the
    server, so they are not listed."""
    if job["start_t_s"] is None or "." in job["id"]:
        return []
    running = job["end_t_s"] is None
    step: Job = {**job, "user": "", "priority": 0, "reason": ""}  # its partition: none
    extern: Job = {**step, "id": f"{job['id']}.extern", "name": "extern", "exit_code": 0,
                   "signal": None, "exit_signal": None,
                   "state": "running" if running else "completed"}  # fmt: skip
    batch = bool(job.get("batch"))
    if batch and job.get("interactive"):  # railyard alloc: salloc's shell is no step
        return [extern]
    main: Job = {**step, "id": f"{job['id']}.{'batch' if batch else '0'}",
                 "name": "batch" if batch else job["name"]}  # fmt: skip
    if not running and job["state"] in STOPPED:
        main = {**main, "state": "cancelled", "exit_code": None, "signal": "SIGTERM",
                "exit_signal": "SIGTERM"}  # fmt: skip
    return [main, extern] if batch else [extern, main]


def _printed(value: Field) -> Field:
    return lambda job: printable(value(job))


_UNGATHERED_NAMES = """MaxRSS MaxRSSNode MaxRSSTask AveRSS MaxVMSize MaxVMSizeNode
    MaxVMSizeTask AveVMSize MaxPages MaxPagesNode MaxPagesTask AvePages MinCPU MinCPUNode
    MinCPUTask AveCPU AveCPUFreq ConsumedEnergy ConsumedEnergyRaw MaxDiskRead MaxDiskReadNode
    MaxDiskReadTask AveDiskRead MaxDiskWrite MaxDiskWriteNode MaxDiskWriteTask AveDiskWrite
    TRESUsageInAve TRESUsageInMax TRESUsageOutAve TRESUsageOutMax"""
UNGATHERED = frozenset(_UNGATHERED_NAMES.lower().split())
"""sacct's fields of per-step usage (jobacct_gather): railyard gathers none, so they print
blank, as sacct's do where ``JobAcctGatherType=jobacct_gather/none`` (a script reading MaxRSS
gets an empty value, not an error)."""
SACCT_LONG = (
    "JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxRSS,AveRSS,AveCPU,NTasks,AllocCPUS,"
    "Elapsed,State,ExitCode,ReqMem,ReqTRES,AllocTRES"
)
"""sacct ``-l``: its long list, cut to the fields railyard keeps or prints blank."""


def sacct_table(fmt: str, jobs: list[Job], exit_code: Field, *, parsable: bool) -> list[str]:
    """sacct ``--format=JobID,JobName%30,State``: a header, a dashed rule (not with -P), a
    line per job; sacct cuts a value to its width and marks the cut with ``+``."""
    known = {
        name: (header, width, _printed(value))
        for name, (header, width, value) in sacct_fields(exit_code).items()
    }
    columns: list[tuple[str, int, Field]] = []
    for item in (part.strip() for part in fmt.split(",")):
        name, _, width = item.partition("%")
        found = known.get(name.lower())
        if found is None and name.lower() in UNGATHERED:  # blank, as sacct without gathering
            found = (name, 10, lambda _job: "")
        if found is None or (width and not width.isdigit()):
            what = f"field {name!r}" if found is None else f"width {width!r} of {name}"
            raise ValueError(
                f"--format: unknown {what} (hint: e.g. JobID,JobName%30,State; "
                f"fields: {','.join(h for h, _, _ in known.values())})"
            )
        header, default, value = found
        columns.append((header, int(width) if width else default, value))
    if parsable:
        rows = [[h for h, _, _ in columns], *([v(j) for _, _, v in columns] for j in jobs)]
        return ["|".join(row) for row in rows]

    def cell(text: str, width: int) -> str:
        return (text[: width - 1] + "+" if len(text) > width else text).rjust(width)

    lines = [" ".join(h.rjust(w)[:w] for h, w, _ in columns)]
    lines.append(" ".join("-" * w for _, w, _ in columns))
    lines += [" ".join(cell(v(j), w) for _, w, v in columns).rstrip() for j in jobs]
    return lines


def _scontrol_time(t_s: float | None) -> str:
    return _time(t_s).replace("N/A", "Unknown")


def _owner(name: str) -> str:
    """scontrol's ``alice(1000)``: the uid where this machine knows the account."""
    import pwd  # `show job` pays for it, not `queue`

    try:
        return f"{name}({pwd.getpwnam(name).pw_uid})"
    except KeyError:
        return name


def scontrol_job(job: Job, exit_code: Field) -> str:
    """``scontrol show job N``'s ``Key=Value`` lines (the keys a script greps: JobState,
    NodeList, ExitCode, RunTime, TimeLimit, StdOut...), with railyard's facts; a key railyard
    has no fact for is left out rather than made up."""
    facts: dict[str, Any] = dict(job)
    unix_user = facts.get("unix_user") or job["user"]
    start, end, limit = job["start_t_s"], job["end_t_s"], job["walltime_s"]
    if end is None and start is not None and limit is not None:
        end = start + limit  # scontrol's EndTime of a running job: when its limit runs out
    tasks, gpus = facts.get("ntasks_per_node"), job["gpus"]
    stdout = _shown_path(facts.get("output"), job, unix_user)  # a command job's: railyard logs
    lines = [
        [*_job_ids(job), ("JobName", job["name"] or "")],
        [("UserId", _owner(unix_user)), ("Account", job["queue"]),
         ("QOS", qos_of(job["priority"], facts.get("nice", 0)))],
        [("Priority", str(shown_priority(job))), ("Nice", str(facts.get("nice", 0)))],
        [("JobState", LONG_STATES.get(job["state"], job["state"].upper())),
         ("Reason", _scontrol_reason(job)),
         ("Dependency", facts.get("dependency") or "(null)")],
        [("Requeue", str(int(bool(facts.get("requeue"))))),
         ("Restarts", str(job["restart_count"])), ("BatchFlag", str(int(bool(job.get("batch"))))),
         ("ExitCode", exit_code(job) or "0:0")],
        [("RunTime", clock(job["elapsed_s"] or 0.0)), ("TimeLimit", _limit_clock(limit))],
        [("SubmitTime", _scontrol_time(job["submit_t_s"]))],
        [("StartTime", _scontrol_time(start)), ("EndTime", _scontrol_time(end))],
        [("Partition", job["queue"])],
        [("NodeList", _nodes(job) or "(null)")],
        [("NumNodes", _node_count(job)),
         ("NumTasks", str(tasks * int(_node_count(job))) if tasks else "N/A"),
         ("CPUs/Task", str(facts.get("cpus_per_task") or 1))],
        [("TRES", f"node={_node_count(job)}" + (f",gres/gpu={gpus}" if gpus else ""))],
        [("Command", " ".join(job["command"]))],
        [("WorkDir", job["workdir"])],
        [("StdErr", _shown_path(facts.get("error"), job, unix_user) if facts.get("error")
                    else stdout)],
        [("StdIn", "/dev/null")],
        [("StdOut", stdout)],
    ]  # fmt: skip
    text = [" ".join(f"{k}={printable(v)}" for k, v in line) for line in lines]
    return "\n".join([text[0], *("   " + line for line in text[1:])])


def _shown_path(pattern: str | None, job: Job, unix_user: str) -> str:
    """An ``--output``/``--error`` file as scontrol shows it: its pattern filled in (``%j``
    the job's own number, ``%A_%a`` an array task's) and under the job's WorkDir when
    relative, the path a script reads to find the log; ``%N`` stays until the job has a node."""
    if not pattern:
        return "(null)"
    own = str(job.get("task_number") or job["id"])
    array = job.get("array_parent")
    fields = {"j": own, "A": array or own, "x": job["name"] or "", "u": unix_user}
    if array is not None:
        fields["a"] = str(job.get("array_index"))
    node = next(iter(job["placement"] or {}), "%N")
    return os.path.join(job["workdir"] or "", expand_pattern(pattern, fields, node=node))


def _limit_clock(limit_s: float | None) -> str:
    return "UNLIMITED" if limit_s is None else clock(limit_s)
