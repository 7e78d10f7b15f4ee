"""``railyard show``: everything about one job (scontrol show job's Key=Value lines with
``show job N``), an array's summary and tasks, Slurm hostlists (``show hostnames``) and
partitions and nodes (``show partition|node [NAME]``, `cli.showcluster`)."""

from __future__ import annotations

import argparse
from collections import Counter

from railyard.cli.args import Command, Parser, connect, emit_json, fail, json_flag
from railyard.cli.jobs import job_rows
from railyard.cli.text import clock, iso, pairs, placement
from railyard.client.printable import printable
from railyard.client.wire import Job

_TIMES = {"submit_t_s": "submit_time", "start_t_s": "start_time", "end_t_s": "end_time",
          "begin_t_s": "begin_time", "deadline_t_s": "deadline",
          "run_t_s": "image_ready_time", "active_t_s": "active_time"}  # fmt: skip
_DURATIONS = {"walltime_s": "time_limit", "elapsed_s": "elapsed", "age_s": "age"}


def _show_value(key: str, value: object) -> str:
    if value is None:
        return ""
    if key in _TIMES and isinstance(value, int | float):
        return iso(value)
    if key in _DURATIONS and isinstance(value, int | float):
        return clock(value)
    if key == "placement" and isinstance(value, dict):
        return placement(value)
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def _show_job(job: Job) -> str:
    items = []
    for key, value in job.items():
        label = _TIMES.get(key) or _DURATIONS.get(key) or key
        if key == "walltime_s" and value is None:
            items.append((label, "UNLIMITED"))
        else:
            items.append((label, _show_value(key, value)))
    return pairs(items)


def _show_array(parent: str, tasks: list[Job]) -> str:
    """A summary of an array's tasks, then one line per task."""
    first = tasks[0]
    states = Counter(t["state"].upper() for t in tasks)
    starts = [t["start_t_s"] for t in tasks if t["start_t_s"] is not None]
    ends = [t["end_t_s"] for t in tasks if t["end_t_s"] is not None]
    indices = [t["array_index"] for t in tasks if t["array_index"] is not None]
    head = [
        ("array", f"{parent} ({len(tasks)} tasks, indices {min(indices)}-{max(indices)})"),
        ("name", first["name"]),
        ("user", first["user"]),
        ("queue", first["queue"]),
        ("gpus_each_job", str(first["gpus"])),  # each array task (not --gpus-per-task)
        ("states", ", ".join(f"{s} {n}" for s, n in sorted(states.items()))),
        ("submit_time", iso(min(t["submit_t_s"] for t in tasks))),
        ("first_start", iso(min(starts)) if starts else ""),
        ("last_end", iso(max(ends)) if len(ends) == len(tasks) else ""),
    ]
    return pairs(head) + "\n\n" + job_rows(tasks)


def show(args: argparse.Namespace) -> None:
    """Everything about one job; an array's id shows a summary of its tasks and each task."""
    from railyard.client.client import ClientError

    if args.job_id in ("hostnames", "hostlist"):  # scontrol's `show hostnames`: no server
        from railyard.cli.hostnames import show_hostlist

        show_hostlist(args.job_id, args.scontrol_id, as_json=args.json)
        return
    if args.job_id in ("partition", "node"):  # scontrol show partition|node [NAME]
        from railyard.cli.showcluster import show_cluster

        show_cluster(args.job_id, args.scontrol_id, as_json=args.json)
        return
    scontrol = args.job_id == "job" and args.scontrol_id is not None
    if scontrol:  # `show job N`: scontrol show job's spelling and its Key=Value lines
        args.job_id = args.scontrol_id
    elif args.scontrol_id is not None:
        fail(
            f"show: one job id, not {args.job_id} {args.scontrol_id} (hint: show ID or show job ID)"
        )
    with connect() as client:
        try:
            job = client.job(args.job_id)
        except ClientError as exc:
            tasks = client.jobs(array=args.job_id) if exc.status == 404 else []
            if not tasks:
                raise
            if args.json:
                emit_json(tasks)
            elif scontrol:  # scontrol show job of an array: each task's record
                from railyard.cli.history import exit_code
                from railyard.cli.jobformat import scontrol_job

                print("\n\n".join(scontrol_job(task, exit_code) for task in tasks))
            else:
                print(_show_array(args.job_id, tasks))
            return
        events = client.job_events(args.job_id) if args.events else None
    if args.json:
        emit_json({**job, "events": events} if events is not None else job)
        return
    if scontrol:
        from railyard.cli.history import exit_code
        from railyard.cli.jobformat import scontrol_job

        print(scontrol_job(job, exit_code))
    else:
        print(_show_job(job))
    if events is not None:
        print(
            "\n"
            + "\n".join(
                f"{iso(e['t_s'])}  {e['kind']:<10} {printable(e['message'])}" for e in events
            )
        )


def _show_args(p: Parser) -> None:
    p.add_argument(
        "job_id", metavar="ID",
        help="a job id, an array's id, job, hostnames, hostlist, partition or node",
    )  # fmt: skip
    p.add_argument(
        "scontrol_id", metavar="ID", nargs="?",
        help="`show job ID`: scontrol show job's Key=Value lines; `show hostnames LIST`; "
        "`show partition [NAME]`, `show node [NAME]`",
    )  # fmt: skip
    p.add_argument(
        "--events", action="store_true", help="its history too: start, pulling, running, end..."
    )
    json_flag(p)


# -- acting on jobs ------------------------------------------------------------------------------


COMMANDS = (Command("show", show, _show_args),)
