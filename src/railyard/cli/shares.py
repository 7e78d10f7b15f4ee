"""``railyard sprio`` and ``railyard sshare``: why pending jobs wait in the order they do.

railyard orders by keys compared one after the other (`control.usecases.priorityviews`), not
by Slurm's weighted sum of factors, so ``sprio`` shows each pending job's keys and its place
(ORDER), and ``-w`` says which keys the loop's ordering compares, in which order, where sprio
prints its weights. ``sshare`` prints the fair tree's figures in sshare's columns.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from railyard.cli.args import Command, Parser, connect, emit_json, json_flag
from railyard.cli.jobsel import job_ids, matches
from railyard.cli.text import clock
from railyard.client.printable import printable

if TYPE_CHECKING:
    from railyard.client.wire import Priorities, Share

KEY_WORDS = {
    "starving": "STARVING (waited past {limit}: ahead of the rest)",
    "priority": "PRIORITY (higher first: the job's class less its nice)",
    "fair_share": "FAIRSHARE (lower first: usage share / weight share at each queue level, "
    "the user's in the queue last)",
    "age": "AGE (older first)",
}


def ordering_line(answer: Priorities) -> str:
    """The keys in the order the loop compares them (sprio -w's place)."""
    limit = clock(answer["starvation_limit_s"] or 0.0)  # keys name "starving" only with one
    keys = [KEY_WORDS[k].format(limit=limit) for k in answer["keys"]]
    if not keys:
        return f"ordering {answer['ordering']}: by what the cycle measures; no keys to show"
    return (
        f"ordering {answer['ordering']}: " + ", then ".join(keys) + "; no job size, partition,"
        " QOS or TRES factor"
    )


def sprio(args: argparse.Namespace) -> None:
    """Pending jobs' priority factors as the scheduler orders by them, like sprio."""
    with connect() as client:
        answer = client.priorities()
    jobs = [
        j
        for j in answer["jobs"]
        if (args.jobs is None or matches(j, args.jobs))
        and (args.user is None or j["user"] in args.user.split(","))
    ]
    if args.json:
        emit_json({**answer, "jobs": jobs})
        return
    if args.weights:
        print(ordering_line(answer))
        return
    headers = ["JOBID", "PARTITION", "USER", "ORDER", "PRIORITY", "NICE", "FAIRSHARE", "AGE"]
    rows = [
        [j["id"], j["queue"], j["user"], "held" if j["order"] is None else str(j["order"]),
         str(j["priority"]), str(j["nice"]), "/".join(f"{x:.2f}" for x in j["fair_share"]),
         clock(j["age_s"]) + ("*" if j["starving"] else "")]
        for j in jobs
    ]  # fmt: skip
    lines = [headers, *rows][1 if args.noheader else 0 :]
    widths = [max(len(printable(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    for line in lines:  # sprio's layout: right-aligned but JOBID's and USER's neighbours
        print(" ".join(printable(c).rjust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def _sprio_args(p: Parser) -> None:
    # sprio's -h is --noheader; help stays at --help (the optionals group checks conflicts)
    p.conflict_handler = p._optionals.conflict_handler = "resolve"
    p.add_argument("--jobs", "-j", type=job_ids, help="only these jobs: 12,13_2")
    p.add_argument("--user", "-u", help="only these users' jobs: a,b")
    p.add_argument(
        "--weights", "-w", action="store_true", help="the keys the ordering compares (sprio -w)"
    )
    p.add_argument("--long", "-l", action="store_true", help="accepted for sprio -l")
    p.add_argument("--noheader", "-h", action="store_true", help="no header line (sprio -h)")
    json_flag(p)


SSHARE = (("Account", 20), ("User", 10), ("RawShares", 10), ("NormShares", 11),
          ("RawUsage", 11), ("EffectvUsage", 13), ("FairShare", 10), ("LevelFS", 10))  # fmt: skip


def _share_cells(s: Share) -> list[str]:
    level = "inf" if s["level_fs"] is None else f"{s['level_fs']:.6f}"
    fair = "" if s["fair_share"] is None else f"{s['fair_share']:.6f}"
    return [" " * s["depth"] + s["queue"], s["user"], f"{s['raw_shares']:g}",
            f"{s['norm_shares']:.6f}", str(round(s["raw_usage_gpu_s"])),
            f"{s['effective_usage']:.6f}", fair, level]  # fmt: skip


def sshare(args: argparse.Namespace) -> None:
    """Fair-share figures per queue and user, like sshare -a (RawUsage in GPU-seconds)."""
    with connect() as client:
        rows = client.shares()
    if args.user is not None:
        wanted = set(args.user.split(","))
        rows = [s for s in rows if not s["user"] or s["user"] in wanted]
    if args.json:
        emit_json(rows)
        return
    count = len(SSHARE) if args.long else len(SSHARE) - 1  # LevelFS with -l, as sshare
    columns = SSHARE[:count]
    body = [_share_cells(s)[:count] for s in rows]
    if args.parsable:
        lines = [[h for h, _ in columns], *body][1 if args.noheader else 0 :]
        print("\n".join("|".join(printable(c) for c in line) for line in lines))
        return

    def line(cells: list[str]) -> str:  # Account and User left-justified, as sshare
        padded = [
            printable(c).ljust(w) if i < 2 else printable(c).rjust(w)
            for i, (c, (_, w)) in enumerate(zip(cells, columns, strict=True))
        ]
        return " ".join(padded)

    out = (
        []
        if args.noheader
        else [line([h for h, _ in columns]), line(["-" * w for _, w in columns])]
    )
    out += [line(cells) for cells in body]
    print("\n".join(line.rstrip() for line in out))


def _sshare_args(p: Parser) -> None:
    p.add_argument("--all", "-a", action="store_true", help="accepted for sshare -a")
    p.add_argument("--users", "-u", dest="user", help="only these users' lines: a,b")
    p.add_argument("--long", "-l", action="store_true", help="LevelFS too (sshare -l)")
    p.add_argument("--parsable2", "-P", dest="parsable", action="store_true", help='"|" between')
    p.add_argument("--noheader", "-n", action="store_true", help="no header (sshare -n)")
    json_flag(p)


COMMANDS = (
    Command("sprio", sprio, _sprio_args),
    Command("sshare", sshare, _sshare_args),
)
