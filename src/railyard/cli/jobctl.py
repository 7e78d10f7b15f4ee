"""``railyard cancel``, ``hold``, ``release`` and ``update``: scancel's and scontrol's
changes to jobs already submitted, each refusal one line (exit 1; 2 for bad input)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from railyard.cli.args import Command, Parser, connect, emit_json, fail, json_flag
from railyard.cli.jobs import ACTIVE_STATES, RUNNING
from railyard.cli.jobsel import expand_ids, matches, states_of
from railyard.client.bounds import MAX_CANCEL_IDS

if TYPE_CHECKING:
    from railyard.client.wire import Job


def _each(args: argparse.Namespace, act: str, done: str) -> int:
    """Apply ``act`` to every id; report each result, and exit 1 if any was refused (2 if
    any was bad input, a 422). Many ids to cancel go in one request and one transaction, as
    ``scancel 12 13 14``: the loop never starts one of them while the others are being
    cancelled; more than a request takes (an admin's ``cancel -u alice`` of her 5,000 jobs)
    go in requests of :data:`MAX_CANCEL_IDS`, each its own transaction, so no request's work
    grows with how many jobs a user has."""
    from railyard.client.client import ClientError

    results: list[Job] = []
    refused: list[tuple[str, str, int | None]] = []
    args.job_ids = expand_ids(args.job_ids)  # 12_[1-3], 12_1,12_2: one id each
    with connect() as client:
        if act == "cancel" and len(args.job_ids) > 1:
            ids = list(args.job_ids)
            for start in range(0, len(ids), MAX_CANCEL_IDS):
                answer = client.cancel_many(ids[start : start + MAX_CANCEL_IDS])
                results += answer["jobs"]
                refused += [(r["id"], r["detail"], r["status"]) for r in answer["refused"]]
        else:

            def signal(job_id: str) -> list[Job]:
                return client.signal(job_id, args.signal, batch=args.batch)

            def requeue_one(job_id: str) -> list[Job]:
                return client.requeue(job_id, hold=args.hold)

            method = {"cancel": client.cancel, "hold": client.hold, "release": client.release,
                      "signal": signal, "requeue": requeue_one}  # fmt: skip
            for job_id in args.job_ids:
                try:
                    results += method[act](job_id)
                except ClientError as exc:
                    if exc.status is None:
                        raise
                    refused.append((job_id, exc.detail, exc.status))
    for job_id, detail, _ in refused:
        named = f"'{job_id}'" in detail  # "no job '99999'" names it already
        print(f"railyard: {'' if named else f'{job_id}: '}{detail}", file=sys.stderr)
    if args.json:
        emit_json(results)
    else:
        for job in results:
            print(f"{job['id']} {job['state'] if act == 'cancel' else done}")
    if any(status == 422 for _, _, status in refused):
        return 2  # bad input, as everywhere: exit 2
    return 1 if refused else 0


def cancel(args: argparse.Namespace) -> int:
    """Cancel jobs: pending ones end at once, running ones are stopped by the scheduler loop.

    As scancel, --name, --user, --state and --partition choose the jobs (all of them must
    match; with ids, among those ids), and the chosen ones are cancelled in one transaction.
    """
    chosen = (args.name, args.user, args.state, args.partition)
    if not args.job_ids and not any(chosen):
        fail("cancel: name the jobs (hint: railyard cancel ID..., or --name/--user/--state)")
    if any(chosen):
        with connect() as client:
            jobs = client.jobs(
                states=states_of(args.state) or (RUNNING if args.signal else ACTIVE_STATES),
                queue=args.partition,
                user=args.user or client.whoami()["name"],
            )
        named = [j for j in jobs if args.name is None or j["name"] == args.name]
        if args.job_ids:
            wanted = expand_ids(args.job_ids)
            named = [j for j in named if matches(j, wanted)]
        if not named:
            print("railyard: cancel: no job of yours matches", file=sys.stderr)
            return 0
        args.job_ids = [j["id"] for j in named]
    if args.batch and args.signal is None:
        fail("cancel: --batch goes with --signal (hint: railyard cancel -b -s USR1 ID)")
    if args.signal is not None:
        return _each(args, "signal", f"signalled {args.signal}")
    return _each(args, "cancel", "cancelled")


def _cancel_args(p: Parser) -> None:
    p.add_argument(
        "job_ids",
        nargs="*",
        metavar="ID",
        help="job ids (an array id: all its tasks; 12_[1-3]: those tasks)",
    )
    p.add_argument("--name", "-n", help="jobs of this name (scancel --name)")
    p.add_argument("--user", "-u", help="this user's jobs (another's: admins)")
    p.add_argument(
        "--state", "-t", action="append", help="jobs in this state (default: unfinished ones)"
    )
    p.add_argument("--partition", "-p", "--queue", dest="partition", help="jobs of this queue")
    p.add_argument(
        "--signal",
        "-s",
        metavar="SIG",
        help="send SIG (USR1, 10...) to the running jobs' processes instead of cancelling "
        "(a batch script's: to its steps, not its shell, as scancel)",
    )
    p.add_argument(
        "--batch", "-b", action="store_true",
        help="with --signal: to the batch script's shell alone (scancel --batch)",
    )  # fmt: skip
    json_flag(p)


def hold(args: argparse.Namespace) -> int:
    """Keep pending jobs from starting (scontrol hold); an array's id holds its pending tasks.

    An admin holding another user's job sets an admin hold, which only an admin releases.
    """
    return _each(args, "hold", "held")


def release(args: argparse.Namespace) -> int:
    """Let held jobs start again (scontrol release)."""
    return _each(args, "release", "released")


def requeue(args: argparse.Namespace) -> int:
    """Stop running jobs and queue them again, one restart more (scontrol requeue).

    --hold brings them back held (scontrol requeuehold; release lets them run). Their output
    files start over, as Slurm's, unless the job asked --open-mode=append;
    SLURM_RESTART_COUNT says which run it is. Only a running job is requeued here (Slurm also
    requeues finished batch jobs).
    """
    return _each(args, "requeue", "requeued and held" if args.hold else "requeued")


def requeuehold(args: argparse.Namespace) -> int:
    """Stop running jobs and queue them again held (scontrol requeuehold): `requeue --hold`."""
    args.hold = True
    return requeue(args)


def _requeue_args(p: Parser) -> None:
    _ids_args(p)
    p.add_argument("--hold", action="store_true", help="come back held (scontrol requeuehold)")


def _ids_args(p: Parser) -> None:
    p.add_argument(
        "job_ids",
        nargs="+",
        metavar="ID",
        help="job ids (an array id: all its tasks; 12_[1-3]: those tasks)",
    )
    json_flag(p)


UPDATE_KEYS = {"timelimit": "time", "priority": "priority", "dependency": "dependency",
               "nice": "nice", "name": "name", "jobname": "name",
               "arraytaskthrottle": "array_throttle"}  # fmt: skip


def update(args: argparse.Namespace) -> int:
    """Change a job's time limit (pending or running), priority or dependency (scontrol update).

    An array's id changes its pending tasks. Options, or scontrol's words: TimeLimit=1:00:00
    (+30 adds 30 minutes, -30 takes them off) Priority=high Dependency=afterok:12
    (Dependency= removes it) Nice=10 Name=NEW, and on an array's id ArrayTaskThrottle=N (0:
    no limit). A plain user may lower a time limit, not raise it. Priority=0 holds the job,
    as in Slurm (release lets it go)."""
    change = {k: v for k, v in (("time", args.time), ("priority", args.priority),
                                ("dependency", args.dependency), ("nice", args.nice),
                                ("name", args.name)) if v is not None}  # fmt: skip
    for word in args.settings:
        key, sep, value = word.partition("=")
        field = UPDATE_KEYS.get(key.lower()) if sep else None
        if field is None:
            fail(f"update: {word!r} is not KEY=VALUE of {', '.join(UPDATE_KEYS)} "
                 "(hint: TimeLimit=1:00:00, or --time 1:00:00)")  # fmt: skip
        change[field] = value
    hold = str(change.get("priority", "")).strip() == "0"  # Slurm's hold: priority 0
    if hold:
        del change["priority"]
    if not change and not hold:
        fail("update: nothing to change (hint: --time T, --priority P or --dependency D)")
    for key, word in (("nice", "Nice"), ("array_throttle", "ArrayTaskThrottle")):
        if key in change:
            try:
                change[key] = int(change[key])
            except ValueError:
                fail(f"update: {word}: expected an integer, got {change[key]!r}")
    if "time" in change:  # whole minutes, rounded up, as scontrol keeps a TimeLimit
        from railyard.client.values import whole_minutes

        try:
            change["time"] = whole_minutes(change["time"])
        except ValueError as exc:
            fail(f"update: TimeLimit: {exc}")
    job_id = (
        args.job_id.split("=", 1)[1] if args.job_id.lower().startswith("jobid=") else args.job_id
    )
    with connect() as client:
        jobs = client.update(job_id, change) if change else []
        held = client.hold(job_id) if hold else []
    jobs = list({job["id"]: job for job in [*jobs, *held]}.values())
    if args.json:
        emit_json(jobs)
    elif "array_throttle" in change or any(j.get("array_parent") == job_id for j in jobs):
        print(f"{job_id} {'held' if hold and not change else 'updated'}")  # an array: one line
    else:
        for job in jobs:
            print(f"{job['id']} {'held' if hold and not change else 'updated'}")
    return 0


def _update_args(p: Parser) -> None:
    p.add_argument(
        "job_id", metavar="ID", help="a job (running: its time limit only), or an array's id"
    )
    p.add_argument("settings", nargs="*", metavar="KEY=VALUE", help="TimeLimit=, Priority=...")
    p.add_argument(
        "--time", "-t", help="the new time limit, or +T/-T to change it (a plain user: only lower)"
    )
    p.add_argument("--priority", help="an integer or low|normal|high|critical; 0 holds the job")
    p.add_argument("--dependency", "-d", help="afterok:ID... ('' removes it)")
    p.add_argument("--nice", help="the job's nice: its priority moves by the difference")
    p.add_argument("--name", "-J", help="the job's new name")
    json_flag(p)


COMMANDS = (
    Command("cancel", cancel, _cancel_args),
    Command("hold", hold, _ids_args),
    Command("release", release, _ids_args),
    Command("requeue", requeue, _requeue_args),
    Command("requeuehold", requeuehold, _ids_args),
    Command("update", update, _update_args),
)
