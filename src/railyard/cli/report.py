"""``railyard report``: GPU-hours by user, queue and account per period, like ``sreport``.

Every attempt's GPUs times its run inside the window count (a preempted run too); running
jobs count up to now. An account is the root of a queue's tree. Periods are UTC calendar days,
weeks (from Monday) or months. SHARE is of the cluster's GPU-hours in the period. A user sees
their own usage; an admin everyone's, or one user's with ``--user``. ``--csv`` and ``--json``
are for spreadsheets and scripts.
"""

from __future__ import annotations

import argparse
import csv
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from railyard.cli.args import Command, Parser, connect, emit_json, fail, json_flag
from railyard.cli.text import table
from railyard.client.timespec import parse_time

if TYPE_CHECKING:
    from railyard.client.wire import Report, UsageLine

GROUPS = ("user", "queue", "account")
PERIODS = ("total", "day", "week", "month")


def _groups(text: str) -> list[str]:
    wanted = [g.strip().lower() for g in text.split(",") if g.strip()]
    unknown = [g for g in wanted if g not in GROUPS]
    if unknown or not wanted:
        fail(f"report: --by {text!r}: unknown group {','.join(unknown) or '(none)'} "
             f"(hint: any of {','.join(GROUPS)}, e.g. --by account,user)")  # fmt: skip
    return wanted


def _utc(t_s: float, period: str) -> str:
    t = datetime.fromtimestamp(t_s, UTC)
    if period == "month":
        return t.strftime("%Y-%m")
    if period in ("day", "week"):
        return t.strftime("%Y-%m-%d")
    return t.strftime("%Y-%m-%dT%H:%M")


def report(args: argparse.Namespace) -> None:
    """GPU-hours by user, queue and account per period, like sreport."""
    now = datetime.now()
    try:
        since = parse_time(args.starttime, now) if args.starttime else (
            parse_time("today", now) - timedelta(days=6))  # fmt: skip
        until = parse_time(args.endtime, now) if args.endtime else now
    except ValueError as exc:
        fail(f"report: {exc}")
    if until <= since:
        fail(f"report: --endtime {until.isoformat()} is not after --starttime "
             f"{since.isoformat()} (hint: -S now-7days)")  # fmt: skip
    with connect() as client:
        found = client.report(start_t_s=since.timestamp(), end_t_s=until.timestamp(),
                              period=args.period, by=args.by, user=args.user)  # fmt: skip
    if args.json:
        emit_json(found)
        return
    headers = ["PERIOD", *(g.upper() for g in found["by"]), "GPU-HOURS", "SHARE"]
    rows = [_row(line, found) for line in found["lines"]]
    if args.csv:
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow([h.lower().replace("-", "_") for h in headers])
        out.writerows(rows)
        return
    print(f"GPU usage {_utc(found['start_t_s'], 'total')} - {_utc(found['end_t_s'], 'total')} "
          f"UTC, {found['cluster_gpus']} GPUs in the cluster")  # fmt: skip
    if not rows:
        print("no usage in this window")
        return
    shown = [[*r[:-2], f"{float(r[-2]):,.2f}", f"{float(r[-1]):.2%}"] for r in rows]
    if found["period"] == "total":  # one period: the window, said above
        headers, shown = headers[1:], [r[1:] for r in shown]
    print(table(headers, shown, right=("GPU-HOURS", "SHARE")))


def _row(line: UsageLine, found: Report) -> list[str]:
    period = _utc(line["start_t_s"], found["period"])
    groups = [str(line[g]) for g in found["by"]]  # type: ignore[literal-required]
    return [period, *groups, f"{line['gpu_hours']:.4f}", f"{line['share']:.4f}"]


def _report_args(p: Parser) -> None:
    p.add_argument("--starttime", "-S", metavar="TIME", help="default: 6 days before today")
    p.add_argument("--endtime", "-E", metavar="TIME", help="default: now")
    p.add_argument("--period", "-p", choices=PERIODS, default="total", help="default: total")
    groups = "user, queue, account, or several: account,user (default: user)"
    p.add_argument("--by", type=_groups, default=["user"], metavar="GROUPS", help=groups)
    p.add_argument("--user", "-u", help="one user's usage (admins)")
    p.add_argument("--csv", action="store_true", help="comma-separated, one header line")
    json_flag(p)


COMMANDS = (Command("report", report, _report_args),)
