"""Job commands against a running control plane: submit, queue, show, cancel, hold, release,
logs. Thin: parse, call :class:`~railyard.client.client.Client`, print.

``submit`` reads its options as sbatch does (options first, then the script or ``--`` and the
command) through the same table as ``#SBATCH`` directives, so a flag and a directive can never
mean different things; the server checks the rest. Modules a command alone needs are imported
in that command (``railyard --help`` and ``queue`` must not pay for them).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from railyard.cli.args import Command, Parser, connect, describe, emit_json, fail, json_flag
from railyard.cli.jobsel import matches, states_of
from railyard.cli.text import iso, pairs, placement, raw, squeue_time, table

if TYPE_CHECKING:
    from railyard.client.client import Client
    from railyard.client.wire import Job

MIN_JOB_AGE_S = 300.0  # squeue shows a finished job this long (Slurm's MinJobAge default)
ACTIVE_STATES = ["pending", "starting", "running", "preempting", "cancelling"]  # unfinished
RUNNING = ["running", "preempting"]  # what a signal reaches

# -- submit --------------------------------------------------------------------------------------

OPTION_HELP = {
    "--gpus": "total GPUs (one process per GPU)",
    "--nodes": "nodes, with --gpus-per-node",
    "--gpus-per-node": "GPUs on each node",
    "--gres": "gpu:N, GPUs per node",
    "--workers": "processes, with --gpus-per-worker",
    "--gpus-per-worker": "GPUs each process sees",
    "--gpus-per-task": "GPUs each task sees, its own (with --ntasks)",
    "--flavor": "GPU type",
    "--queue": "queue to submit to",
    "--partition": "the same as --queue",
    "--priority": "an integer or low|normal|high|critical",
    "--qos": "low|normal|high|critical",
    "--nice": "lower the priority by N (Slurm's --nice; below 0: admins only)",
    "--time": "walltime: MM, HH:MM:SS, D-HH:MM:SS ...",
    "--preemptible": "may be preempted by higher priorities",
    "--hold": "submit held: it waits (JobHeldUser) until railyard release",
    "--array": "array tasks, e.g. 0-9%2",
    "--nodelist": "only on these nodes, e.g. gpu[01-04],gpu07",
    "--exclude": "never on these nodes",
    "--constraint": "node features it needs: ib&nvme, h100|a100 (a GPU type is one)",
    "--job-name": "a name for the job",
    "--name": "the same as --job-name",
    "--signal": "[B:]SIG@SECONDS: this signal that long before the time limit (and to preempt)",
    "--requeue": "requeue after a node failure or preemption (--no-requeue: never)",
    "--chdir": "working directory",
    "--export": "ALL (default), NONE, or [ALL,]VAR[=VAL],...: the job's environment",
    "--ntasks": "tasks in all (srun's count)",
    "--ntasks-per-node": "tasks on each node (1 for a script that runs torchrun itself)",
    "--cpus-per-task": "CPUs each task needs",
    "--mem": "memory per node, e.g. 64G",
    "--mem-per-cpu": "memory per CPU (a task has 1 unless --cpus-per-task)",
    "--mem-per-gpu": "memory per GPU",
    "--output": "stdout file, with %j %A %a %x %u %N",
    "--error": "stderr file, with the same patterns",
    "--dependency": "afterok:ID, afterany:ID, afternotok:ID, after:ID, singleton",
    "--env": "KEY=VAL (repeat)",
    "--topology": "[required:|preferred:]LEVEL",
    "--checkpoint-grace": "seconds between the preemption signal and SIGTERM",
    "--min-runtime": "seconds before the job may be preempted",
    "--container-image": "run every task in this image: NAME[:TAG], docker-archive:PATH ...",
    "--container-mounts": "SRC[:DST[:ro]],... also in the container (under the queue's prefixes)",
    "--container-workdir": "working directory in the container (default: the job's)",
    "--container-env": "NAME,...: the job's value beats the image's (PATH ...)",
    "--no-container-mount-home": "do not mount your home in the container",
}


def submit_usage(prog: str) -> str:
    """The help of ``railyard submit``, from the same option table as the directives."""
    from railyard.client import scripts

    shorts: dict[str, list[str]] = {}
    for short, long in scripts.short_names().items():
        shorts.setdefault(long, []).append(short)
    rows = []
    for name in scripts.option_names():
        spelling = ", ".join([*shorts.get(name, []), name])
        if scripts.takes_value(name):
            spelling += " VALUE"
        rows.append((spelling, OPTION_HELP.get(name, "")))
    rows += [
        ("--wrap CMD", "run CMD as a /bin/sh batch script (sbatch's --wrap)"),
        ("--parsable", "print only the job id (sbatch's --parsable), for $(...)"),
        ("-W, --wait", "return when the job ends, with its exit code (an array: the highest)"),
        ("--test-only", "check it and say when it would start; submit nothing (sbatch's)"),
        ("--json", "machine-readable output"),
        ("-h, --help", "this help"),
    ]
    doc = describe(submit)
    usage = (
        f"usage: {prog} [OPTIONS] SCRIPT\n       {prog} [OPTIONS] -- COMMAND [ARGS...]\n"
        f"       {prog} [OPTIONS] --wrap COMMAND"
    )
    options = "\n".join(f"  {line}" for line in pairs(rows).splitlines())
    return f"{usage}\n\n{doc}\n\noptions:\n{options}"


OWN_SWITCHES = ("--json", "--parsable", "--wait", "-W", "--test-only", "-h", "--help")
WRAPPED = "#!/bin/sh\n# written by railyard submit --wrap\n{command}\n"


def split_submit_argv(
    argv: list[str], wrap: list[str] | None = None
) -> tuple[list[str], list[str], set[str]]:
    """(option words, the script or command, the CLI's own switches ``--json``,
    ``--parsable``, ``--help``): options come first, as with sbatch; ``--`` or the first other
    word ends them. ``--wrap``'s command, if any, is appended to ``wrap``."""
    from railyard.client import scripts

    options: list[str] = []
    own: set[str] = set()
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return options, argv[i + 1 :], own
        if not word.startswith("-") or word == "-":
            return options, argv[i:], own
        if word in OWN_SWITCHES:
            own.add({"-h": "--help", "-W": "--wait"}.get(word, word))
        elif word == "--wrap" or word.startswith("--wrap="):
            if word == "--wrap":
                i += 1
                if i >= len(argv):
                    fail("--wrap: needs a command (hint: --wrap='python train.py')")
                word = "--wrap=" + argv[i]
            if wrap is None:
                fail("--wrap: only railyard submit takes it (hint: put the command after --)")
            wrap.append(word.removeprefix("--wrap="))
        else:
            options.append(word)
            attached = "=" in word if word.startswith("--") else len(word) > 2
            if (
                not attached
                and scripts.takes_value(word)
                and i + 1 < len(argv)
                and scripts.next_is_value(word, argv[i + 1])
            ):
                i += 1
                options.append(argv[i])
        i += 1
    return options, [], own


SCRIPT_SUFFIXES = (".sh", ".sbatch", ".slurm", ".bash", ".job")


def _script_from_stdin() -> str:
    """sbatch without a script reads it from stdin (``sbatch <<EOF``), named ``sbatch`` as
    Slurm names it; a terminal there is a forgotten argument, not a script being typed."""
    from railyard.client.bounds import MAX_SCRIPT_BYTES

    nothing = "nothing to run: give a batch script, -- followed by a command, or --wrap=COMMAND"
    try:
        if sys.stdin is None or sys.stdin.isatty():
            fail(nothing)
        data = sys.stdin.buffer.read(MAX_SCRIPT_BYTES + 1)
    except (OSError, ValueError, AttributeError):  # closed, or no byte stream to read
        fail(nothing)
    if len(data) > MAX_SCRIPT_BYTES:
        fail(f"the script on stdin is over {MAX_SCRIPT_BYTES} bytes (hint: a file, or less)")
    if not data.strip():
        fail("nothing to run: stdin is empty (hint: sbatch job.sh, or pipe a script in)")
    try:
        return data.decode()
    except UnicodeDecodeError:
        fail("the script on stdin is not UTF-8 text")


def _looks_like_script(arg: str) -> bool:
    return arg.endswith(SCRIPT_SUFFIXES) or ("/" in arg and " " not in arg)


def _script_or_command(rest: list[str], after_dashes: bool) -> tuple[Path | None, list[str]]:
    """One word naming a file is a batch script (sbatch's rule); one that looks like a script
    path but names nothing is an error, not a command that fails later. After `--` it is
    always a command."""
    if len(rest) == 1 and not after_dashes:
        path = Path(rest[0])
        if path.is_file():
            return path, []
        if path.is_dir():
            fail(f"{rest[0]} is a directory, not a batch script")
        if _looks_like_script(rest[0]):
            fail(
                f"no such batch script: {rest[0]} "
                "(hint: check the path; to run a command, put it after --)"
            )
    return None, rest


def submit(args: argparse.Namespace) -> int:
    """Submit a job: a batch script (#SBATCH / #RAILYARD directives), or a command after --.

    Options are sbatch's and mean what the directives mean; given on the command line they
    override the script's. A batch script runs once, on the job's first node, with an srun for
    its tasks; a command runs as one task per GPU. The job gets this shell's environment and
    directory (--export=ALL), never the server's. Prints "Submitted batch job N" as sbatch
    does (an array is one job); --parsable prints only N.
    """
    from railyard.client import scripts  # the directive table: only submit pays for it

    wrap: list[str] = []
    options_words, rest, own = split_submit_argv(args.argv, wrap)
    if "--help" in own:
        print(submit_usage(args.prog))
        return 0
    if wrap and rest:
        fail(f"--wrap: runs its own command, not also {rest[0]!r} (hint: give one of them)")
    if wrap and not wrap[-1].strip():
        fail("--wrap: the command is empty (hint: --wrap='python train.py')")
    piped = _script_from_stdin() if not rest and not wrap else None
    after_dashes = "--" in args.argv[: len(args.argv) - len(rest)]
    script, command = _script_or_command(rest, after_dashes) if rest else (None, [])
    notes: list[str] = []
    try:
        flags = scripts.parse_args(options_words, notes)
        body: dict[str, Any]
        if wrap:
            body = {**flags, "script": WRAPPED.format(command=wrap[-1])}
            body.setdefault("name", "wrap")
        elif script is not None or piped is not None:
            text = piped if piped is not None else Path(str(script)).read_text()
            parsed = scripts.parse_script(text, str(script or "<stdin>"))
            notes += parsed.notes
            body = {**scripts.merge(parsed.options, flags), "script": text}
            body.setdefault("name", script.name if script is not None else "sbatch")
        else:
            body = {**flags, "command": command}
            body.setdefault("name", Path(command[0]).name)
        body = _with_environment(body, notes, scripts.resolve_export)
    except scripts.ScriptErrors as exc:
        fail("\n".join(f"railyard: {e}" for e in exc.errors).removeprefix("railyard: "))
    except (scripts.OptionError, scripts.ScriptError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot read {rest[0]}: {exc.strerror}")
    for note in notes:
        print(f"railyard: note: {note}", file=sys.stderr)
    with connect() as client:
        if "--test-only" in own:
            return _test_only(client, body, "--json" in own)
        jobs = client.submit(body)
        if "--json" in own:
            emit_json(jobs)
        elif "--parsable" in own:
            print("\n".join(job["id"] for job in jobs), flush=True)
        else:
            print("\n".join(f"Submitted batch job {job['id']}" for job in jobs), flush=True)
        return _wait_for(client, jobs[0]) if "--wait" in own else 0


def _test_only(client: Client, body: dict[str, Any], as_json: bool) -> int:
    """sbatch --test-only: ``Job to start at T using G GPUs in queue Q``, on stderr as
    sbatch says it; nothing is stored."""
    found = client.test_only(body)
    if as_json:
        emit_json(found)
        return 0
    at = found["start_t_s"]
    when = iso(at) if at is not None else "no time within the twin's horizon"
    print(f"railyard: Job to start at {when} using {found['gpus']} GPUs in queue "
          f"{found['queue']} (nothing was submitted)", file=sys.stderr)  # fmt: skip
    return 0


WAIT_POLL_S = 1.0
FINISHED = ("completed", "failed", "cancelled", "timeout", "node_fail", "deadline")


def _wait_for(client: Client, job: Job) -> int:
    """sbatch --wait: poll until the job (every task of an array) has ended; its exit code,
    an array's highest, 1 for a job that ended without one (cancelled, killed)."""
    import time

    if job.get("array") is None:
        while (now := client.job(job["id"]))["state"] not in FINISHED:
            time.sleep(WAIT_POLL_S)
        return _exit_status(now)
    while client.jobs(array=job["id"], states=ACTIVE_STATES, limit=1):
        time.sleep(WAIT_POLL_S)
    return max((_exit_status(j) for j in client.jobs(array=job["id"])), default=0)


def _exit_status(job: Job) -> int:
    if job["state"] == "completed":
        return 0
    return job["exit_code"] or 1


def _with_environment(body: dict[str, Any], notes: list[str], resolve: Any) -> dict[str, Any]:
    """Add what sbatch captures at submit: the environment per ``--export``, the working and
    submit directories, the submit host. No token is exported."""
    cwd = os.getcwd()
    value, exported, more = resolve(body.pop("export", "ALL"), os.environ)
    notes += more
    exported.pop("RAILYARD_TOKEN", None)  # the server drops token-shaped values too
    workdir = Path(cwd, os.path.expanduser(body.get("workdir") or cwd))
    return {
        **body,
        "export": value,
        "env": {**exported, **body.get("env", {})},
        "workdir": str(workdir),
        "submit_dir": cwd,
        "submit_host": socket.gethostname(),
        "umask": current_umask(),
    }


def current_umask() -> int:
    """This process's umask, which sbatch sends as ``SLURM_UMASK`` and the job's output files
    get; read from /proc (Linux 4.7 on), else set and put back (one thread here)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- looking at jobs -----------------------------------------------------------------------------


def job_rows(jobs: list[Job]) -> str:
    headers = ("JOBID", "NAME", "USER", "QUEUE", "STATE", "GPUS", "PLACEMENT", "TIME", "REASON")
    rows = []
    for j in jobs:
        started = j["start_t_s"] is not None
        # a pending job's wait so far; one that ended unrun (cancelled, past its deadline)
        # ran for 0:00, as squeue says
        time_s = j["elapsed_s"] if started else 0.0 if j["end_t_s"] is not None else j["age_s"]
        row = [j["id"], j["name"] or "-", j["user"], j["queue"], j["state"].upper(), str(j["gpus"])]
        rows.append([*row, placement(j["placement"]), squeue_time(time_s), j["reason"]])
    return table(headers, rows, right=("GPUS",))


def queue(args: argparse.Namespace) -> None:
    """Jobs waiting and running, like squeue: why each pending job waits is in REASON.

    As squeue, finished jobs are not listed unless asked for: `-t all` (or a finished state)
    lists those that ended within --min-job-age seconds (Slurm's MinJobAge, 300); `railyard
    history` keeps them all.
    """
    if args.min_job_age is not None and args.min_job_age < 0:
        fail("queue: --min-job-age must be >= 0")
    if args.iterate is not None:  # squeue -i: again every N seconds, until interrupted
        if not args.iterate >= 1:  # squeue's whole seconds: no loop that hammers the server
            fail("queue: --iterate takes 1 second or more")
        every_s, args.iterate = args.iterate, None
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                queue(args)
                sys.stdout.flush()
                time.sleep(every_s)
                print()
        return
    states = states_of(args.state)
    # squeue -j lists a job that ended within MinJobAge without -t
    finished = states or args.min_job_age is not None or bool(args.jobs)
    if "all" in states:
        states = []
    age_s = args.min_job_age if args.min_job_age is not None else MIN_JOB_AGE_S
    with connect() as client:
        everyone = args.all_users and not args.me
        user = args.user or (None if everyone else client.whoami()["name"])
        jobs = client.jobs(
            states=["pending"] if args.start else states,
            queue=args.queue,
            user=user,
            finished_within_s=age_s if finished else 0.0,
        )
        expected = {e["id"]: e for e in client.expected_starts()} if args.start else None
        if not jobs and (everyone or args.user):  # squeue shows all; here that is an admin's
            me = client.whoami()
            if not me["is_admin"] and (everyone or args.user != me["name"]):
                print("railyard: note: a user sees only their own jobs (an admin sees "
                      "everyone's)", file=sys.stderr)  # fmt: skip
    if args.name:
        names = {n for n in args.name.split(",") if n}
        jobs = [j for j in jobs if j["name"] in names]
    if args.nodelist or args.account or args.qos or args.sort:
        from railyard.cli.queuefilters import filtered, sort_jobs

        try:
            jobs = filtered(jobs, nodes=args.nodelist, accounts=args.account, qos=args.qos)
            jobs = sort_jobs(jobs, args.sort) if args.sort else jobs
        except ValueError as exc:
            fail(f"queue: {exc}")
    if args.jobs:
        jobs = [j for j in jobs if matches(j, args.jobs)]
        if not jobs and len(args.jobs) == 1 and not _known(one := args.jobs[0], age_s):
            fail(f"queue: Invalid job id specified: {one} (hint: railyard history -j {one} "
                 f"lists jobs that ended more than {age_s:g} s ago)", 1)  # fmt: skip
    if not (args.array or args.json or expected is not None):
        from railyard.cli.arrays import fold_pending

        jobs = fold_pending(jobs)
    if expected is not None:
        _print_starts(jobs, expected, args.json)
    elif args.json:
        emit_json(jobs)
    elif args.format is not None or args.Format is not None or args.long:
        from railyard.cli.jobformat import SQUEUE_LONG, format_of_fields, squeue_lines

        try:
            fmt = args.format or SQUEUE_LONG
            if args.Format is not None:
                fmt = format_of_fields(args.Format)
            lines = squeue_lines(fmt, jobs)
        except ValueError as exc:
            fail(f"queue: {exc}")
        if args.long:  # squeue -l: the time first, as ctime spells it
            print(time.ctime())
        print("\n".join(lines[1:] if args.noheader else lines))
    else:
        text = job_rows(jobs)
        print(text.partition("\n")[2] if args.noheader else text)


def _known(job_id: str, age_s: float) -> bool:
    """Whether squeue would know job ``job_id``: it is one this user may see, and running,
    pending or ended within ``age_s`` (Slurm's MinJobAge); else squeue -j says "Invalid job
    id specified" and exits 1."""
    from railyard.client.client import ClientError

    with connect() as client:
        try:
            jobs = [client.job(job_id)]
        except ClientError as exc:
            if exc.status != 404:
                raise
            jobs = client.jobs(array=job_id, finished_within_s=age_s, limit=1)  # an array
    now = time.time()
    return any(
        j["state"] not in FINISHED or j["end_t_s"] is None or now - j["end_t_s"] <= age_s
        for j in jobs
    )


def _print_starts(jobs: list[Job], expected: dict[str, dict[str, Any]], as_json: bool) -> None:
    """squeue --start: pending jobs with the start the twin expects (N/A: not within its
    horizon, or a job without GPUs), on the cluster as it is now."""
    if as_json:
        emit_json([expected[j["id"]] for j in jobs if j["id"] in expected])
        return
    rows = []
    for j in jobs:
        at = expected.get(j["id"], {}).get("start_t_s")
        when = iso(at) if at is not None else "N/A"
        rows.append([j["id"], j["queue"], j["name"] or "-", j["user"], "PD", when,
                     str(j["gpus"]), j["reason"]])  # fmt: skip
    headers = ("JOBID", "QUEUE", "NAME", "USER", "ST", "START_TIME", "GPUS", "REASON")
    print(table(headers, rows, right=("GPUS",)))


def _queue_args(p: Parser) -> None:
    from railyard.cli.jobsel import JOBS_HELP, job_ids

    # squeue's -h is --noheader; help stays at --help (the optionals group checks conflicts)
    p.conflict_handler = p._optionals.conflict_handler = "resolve"
    p.dash_values = frozenset({"-S", "--sort"})  # squeue -S -p: descending priority

    p.add_argument(
        "--state",
        "--states",
        "-t",
        action="append",
        help="e.g. pending,running or PD,R (repeat); all: finished ones too (default: unfinished)",
    )
    p.add_argument("--all", dest="all_users", action="store_true", help="everyone's jobs (admins)")
    p.add_argument("--me", action="store_true", help="only my jobs (squeue --me; the default)")
    p.add_argument("--user", "-u", help="one user's jobs (squeue -u; another's: admins)")
    p.add_argument("--jobs", "-j", type=job_ids, help=JOBS_HELP)
    p.add_argument("--queue", "--partition", "-p", help="only this queue")
    p.add_argument("--nodelist", "-w", metavar="NODES", help="only jobs on these: gpu[01-04]")
    p.add_argument("--account", "-A", metavar="ACCOUNTS", help="only these accounts (queues)")
    p.add_argument("--qos", "-q", metavar="QOS", help="only these classes: low,normal,high")
    p.add_argument("--sort", "-S", metavar="FIELDS", help="squeue's: format letters, -p,i")
    p.add_argument("--iterate", "-i", type=float, metavar="SECONDS", help="list again every N s")
    p.add_argument("--name", "-n", metavar="NAMES", help="only jobs of these names: a,b")
    p.add_argument(
        "--format",
        "-o",
        metavar="FORMAT",
        help='squeue\'s, e.g. "%%.18i %%.9P %%.8j %%.8u %%.2t %%.10M %%.6D %%R"',
    )
    p.add_argument(
        "--Format", "-O", metavar="FIELDS",
        help="squeue's field names, e.g. JobID,Partition,Name:30,StateCompact,ReasonList",
    )  # fmt: skip
    p.add_argument(
        "--long", "-l", action="store_true", help="squeue -l: the time, then more columns"
    )
    p.add_argument("--noheader", "-h", action="store_true", help="no header line (squeue -h)")
    p.add_argument(
        "--array", "-r", action="store_true",
        help="one line per array task (squeue -r); else an array's pending tasks are one line",
    )  # fmt: skip
    p.add_argument(
        "--start",
        action="store_true",
        help="pending jobs and when the scheduler's twin expects them to start (squeue --start)",
    )
    p.add_argument(
        "--min-job-age",
        type=float,
        metavar="SECONDS",
        help=f"list jobs that finished this recently (with -t all: {MIN_JOB_AGE_S:g})",
    )
    json_flag(p)


def logs(args: argparse.Namespace) -> None:
    """Print one rank's log; with -f, keep printing until the job finishes."""
    with connect() as client:
        if args.follow:
            for text in client.follow_logs(args.job_id, rank=args.rank, poll_s=args.poll):
                raw(sys.stdout).write(text)  # the job's own bytes, as cat shows them
                raw(sys.stdout).flush()
            return
        _print_log(client, args.job_id, args.rank)


def _print_log(client: Client, job_id: str, rank: int) -> None:
    offset = 0
    while True:
        chunk = client.logs(job_id, rank=rank, offset=offset)
        raw(sys.stdout).write(chunk["text"])  # the job's own bytes (its header is escaped)
        if chunk["offset"] == offset:
            return
        offset = chunk["offset"]


def _logs_args(p: Parser) -> None:
    p.add_argument("job_id", metavar="ID")
    p.add_argument("--rank", "-r", type=int, default=0)
    p.add_argument("--follow", "-f", action="store_true", help="until the job ends")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between polls")


COMMANDS = (
    Command("submit", submit, None),
    Command("queue", queue, _queue_args),
    Command("logs", logs, _logs_args),
)
