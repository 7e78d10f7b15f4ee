"""``railyard history``: jobs that ran or are running, like ``sacct``.

One line per job with its state, exit code (``code:signal``, as sacct), elapsed time of its
last attempt, GPU-hours of that attempt, restarts, start and end. The window is sacct's:
``--starttime`` (default: midnight today) to ``--endtime`` (default: now) selects the jobs that
were waiting or running at some moment in it (pending ones too, as sacct lists them). A user
sees their own jobs; an admin sees everyone's, or one user's with ``--user``.
"""

from __future__ import annotations

import argparse
import signal
import sys
from datetime import datetime
from typing import TYPE_CHECKING

from railyard.cli.args import Command, Parser, connect, emit_json, fail, json_flag
from railyard.cli.jobsel import JOBS_HELP, job_ids, matches, states_of
from railyard.cli.text import clock, table
from railyard.client.timespec import parse_time

if TYPE_CHECKING:
    from railyard.client.wire import Job

PAGE = 1000


def exit_code(job: Job) -> str:
    """Slurm's ``ExitCode``: ``code:signal`` (``0:9`` for a job killed by SIGKILL); empty
    while it runs; ``0:0`` for a job that ended with neither (a timeout or a cancel the loop
    recorded without the process's status, a pending job cancelled), as sacct shows it."""
    name = job.get("exit_signal") or job.get("signal")
    if name and name in signal.Signals.__members__:
        return f"0:{signal.Signals[name].value}"
    if job["exit_code"] is not None:
        return f"{job['exit_code']}:0"
    return "" if job["end_t_s"] is None else "0:0"


def _local(t_s: float | None) -> str:
    return "Unknown" if t_s is None else datetime.fromtimestamp(t_s).isoformat(timespec="seconds")


def history(args: argparse.Namespace) -> None:
    """Jobs that ran or are running, like sacct: state, exit code, elapsed, GPU-hours."""
    now = datetime.now()
    try:
        since = parse_time(args.starttime, now) if args.starttime else parse_time("today", now)
        until = parse_time(args.endtime, now) if args.endtime else now
    except ValueError as exc:
        fail(f"history: {exc}")
    if until < since:
        fail(f"history: --endtime {until.isoformat()} is before --starttime {since.isoformat()}")
    states = states_of(args.state)
    names = {n for n in (args.name or "").split(",") if n}
    jobs: list[Job] = []
    after: str | None = None
    with connect() as client:
        while args.limit is None or len(jobs) < args.limit:
            page = client.jobs(
                states=states,
                user=args.user,
                queue=args.partition,
                since_t_s=since.timestamp(),
                until_t_s=until.timestamp(),
                limit=PAGE,
                after=after,
            )
            after = page[-1]["id"] if page else after  # the next page walks on from here
            jobs += page  # pending ones too: waiting in the window, as sacct lists them
            if len(page) < PAGE:
                break
    if args.jobs:
        jobs = [j for j in jobs if matches(j, args.jobs)]
    if names:
        jobs = [j for j in jobs if j["name"] in names]
    jobs = jobs[: args.limit]
    if args.json:
        emit_json(jobs)
        return
    if args.brief and args.format is None:  # sacct -b: these three columns
        args.format = "JobID,State,ExitCode"
    if args.long and args.format is None:
        from railyard.cli.jobformat import SACCT_LONG

        args.format = SACCT_LONG
    if args.duplicates:
        print("railyard: note: --duplicates: a requeued job is one record here (Restarts "
              "counts its runs)", file=sys.stderr)  # fmt: skip
    if args.parsable:  # sacct -p: -P's lines, each ended by a "|"
        args.parsable2 = True
    bar = "|" if args.parsable else ""
    if args.format is not None:
        from railyard.cli.jobformat import UNGATHERED, sacct_table, steps

        blank = [f for f in args.format.split(",") if f.partition("%")[0].lower() in UNGATHERED]
        if blank:
            print(f"railyard: note: {','.join(blank)}: blank, no per-step usage is gathered "
                  "(as Slurm's jobacct_gather/none)", file=sys.stderr)  # fmt: skip

        if not args.allocations:  # sacct: each job, then its steps (-X: the jobs alone)
            jobs = [row for j in jobs for row in (j, *steps(j))]
        try:
            lines = sacct_table(args.format, jobs, exit_code, parsable=args.parsable2)
        except ValueError as exc:
            fail(f"history: {exc}")
        skip = (1 if args.parsable2 else 2) if args.noheader else 0
        print("\n".join(line + bar for line in lines[skip:]))
        return
    headers = ("JOBID", "NAME", "USER", "QUEUE", "STATE", "EXITCODE", "ELAPSED", "GPUS",
               "GPU-HOURS", "RESTARTS", "START", "END")  # fmt: skip
    rows = []
    for j in jobs:
        elapsed = j["elapsed_s"]
        gpu_h = "" if elapsed is None else f"{elapsed * j['gpus'] / 3600:.2f}"
        rows.append([
            j["id"], j["name"] or "-", j["user"], j["queue"], j["state"].upper(), exit_code(j),
            clock(elapsed), str(j["gpus"]), gpu_h, str(j["restart_count"]),
            _local(j["start_t_s"]), _local(j["end_t_s"]),
        ])  # fmt: skip
    if args.parsable2:  # sacct -P: fields split by "|", no padding, no trailing "|"
        print("\n".join("|".join(line) + bar for line in [list(headers), *rows][args.noheader :]))
        return
    text = table(headers, rows, right=("GPUS", "GPU-HOURS", "RESTARTS"))
    print(text.partition("\n")[2] if args.noheader else text)


def _history_args(p: Parser) -> None:
    p.add_argument("--jobs", "-j", type=job_ids, help=JOBS_HELP)
    p.add_argument("--parsable2", "-P", action="store_true", help='fields split by "|" (sacct -P)')
    p.add_argument("--parsable", "-p", action="store_true", help='-P with a "|" ending each line')
    p.add_argument("--brief", "-b", action="store_true", help="JobID, State, ExitCode (sacct -b)")
    p.add_argument("--partition", "-r", metavar="QUEUE", help="only this queue's jobs")
    p.add_argument(
        "--allusers", "-a", action="store_true",
        help="everyone's jobs: an admin's default already; a user sees their own",
    )  # fmt: skip
    p.add_argument("--user", "-u", help="one user's jobs (admins)")
    p.add_argument("--state", "-s", action="append", help="e.g. failed,cancelled or F,CA (repeat)")
    p.add_argument("--name", metavar="NAMES", help="only jobs of these names: a,b (sacct --name)")
    p.add_argument("--starttime", "-S", metavar="TIME", help="default: midnight today")
    p.add_argument("--endtime", "-E", metavar="TIME", help="default: now")
    p.add_argument("--limit", type=int, help="at most this many jobs")
    p.add_argument(
        "--format", "-o", metavar="FIELDS", help="sacct's, e.g. JobID,JobName%%30,State,ExitCode"
    )
    p.add_argument("--noheader", "-n", action="store_true", help="no header lines (sacct -n)")
    p.add_argument("--long", "-l", action="store_true", help="sacct -l's fields (those kept)")
    p.add_argument(
        "--duplicates",
        "-D",
        action="store_true",
        help="sacct -D: here a requeued job is one record, its runs counted in Restarts",
    )
    p.add_argument(
        "--units",
        choices=("K", "M", "G", "T", "P"),
        metavar="UNIT",
        help="accepted: memory prints as asked (ReqMem in M)",
    )
    p.add_argument("--noconvert", action="store_true", help="accepted: memory is not converted")
    p.add_argument(
        "--allocations",
        "-X",
        action="store_true",
        help="jobs without their .batch/.extern steps (sacct -X; the steps show with -o only)",
    )
    json_flag(p)


COMMANDS = (Command("history", history, _history_args),)
