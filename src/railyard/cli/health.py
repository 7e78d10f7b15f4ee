"""``railyard health``: run the node's health checks here, and drain or resume it.

Run on the node itself, like Slurm's HealthCheckProgram: by hand, from cron or a systemd
timer. Exit 0 when nothing failed, 1 when a check failed, 2 for bad input.
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from railyard.cli.args import Command, Parser, connect, emit_json, fail, json_flag
from railyard.cli.text import table

if TYPE_CHECKING:
    from railyard.health.result import Result

HEALTH_REASON = "health:"  # drains this command made start so; it resumes only those


def _fractions(values: list[str], option: str, known: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for value in values:
        name, _, number = value.partition("=")
        if number and name not in known:
            fail(f"{option}: unknown check {name!r} (hint: one of {', '.join(known)})")
        try:
            fraction = float(number)
        except ValueError:
            fail(f"{option}: {value!r} is not CHECK=FRACTION (hint: e.g. {option} compute=0.6)")
        if not 0 < fraction <= 1:
            fail(f"{option}: {value!r}: the fraction must be in (0, 1] (hint: e.g. 0.8)")
        out[name] = fraction
    return out


def _default_baseline(node: str) -> Path:
    home = Path(os.environ.get("RAILYARD_HOME") or Path.home() / ".railyard")
    return home / "health" / f"{node}.json"


def health(args: argparse.Namespace) -> int:
    """Check this node against its own baseline (NHC-style; --drain acts on the result).

    With --drain (an admin's token), a failure drains the node through the control plane with
    the check and its figure as the reason, and a later run where nothing fails resumes it.
    Record the baseline once, on the healthy, idle node: --record-baseline."""
    from railyard.health import baseline as baselines
    from railyard.health.checks import CHECKS, Context, record, run_checks

    names = (
        [n.strip() for n in args.checks.split(",") if n.strip()] if args.checks else list(CHECKS)
    )
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        fail(f"--checks: unknown check {unknown[0]!r} (hint: one of {', '.join(CHECKS)})")
    if args.gpus is not None and args.gpus < 0:
        fail(f"--gpus: {args.gpus} is negative (hint: the GPUs this node declares, e.g. 8)")
    fail_below = _fractions(args.fail_below, "--fail-below", list(CHECKS))
    warn_below = _fractions(args.warn_below, "--warn-below", list(CHECKS))
    path = Path(args.baseline) if args.baseline else _default_baseline(args.node)
    if args.record_baseline:
        made = record(names, args.node, time.time())
        baselines.save(path, made)
        if args.json:
            emit_json({"baseline": str(path), "figures": made.figures})
        else:
            for name, value in made.figures.items():
                print(f"{name:<10}{value:10.4g}")
            print(f"baseline of {args.node} written to {path}")
        return 0
    try:
        known = baselines.load(path) if path.exists() or args.baseline else None
    except baselines.BaselineError as exc:
        fail(str(exc))
    ctx = Context(
        args.node,
        declared_gpus=args.gpus,
        baseline=known,
        fail_below=fail_below,
        warn_below=warn_below,
    )
    results = run_checks(names, ctx)
    action = _apply(args.node, results) if args.drain else None
    if args.json:
        emit_json({"node": args.node, "results": [r.to_dict() for r in results], "action": action})
    else:
        _print(results)
        if action:
            print(action)
    return 1 if any(r.status.value == "fail" for r in results) else 0


def _print(results: list[Result]) -> None:
    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.4g}"

    headers = ("CHECK", "STATUS", "MEASURED", "EXPECTED", "RATIO", "UNIT", "SOURCE")
    rows = [
        [r.check, r.status.value.upper(), num(r.measured), num(r.expected), num(r.ratio),
         r.unit, r.source or r.detail]
        for r in results
    ]  # fmt: skip
    print(table(headers, rows))


def _apply(node: str, results: list[Result]) -> str:
    """Drain on the first failure; resume a node this command drained once nothing fails.
    A node an admin drained for another reason is left alone, as NHC leaves a node whose
    note is not its own: neither resumed nor its reason overwritten."""
    failed = [r for r in results if r.status.value == "fail"]
    judged = [r for r in results if r.status.value in ("pass", "warn")]
    with connect() as client:
        current = next((n for n in client.nodes() if n["name"] == node), None)
        if current is None:
            fail(f"--drain: the control plane has no node {node!r} (hint: give --node NAME)")
        ours = current["state"] == "ready" or current["reason"].startswith(HEALTH_REASON)
        if failed and ours:
            reason = failed[0].reason()
            client.drain(node, reason)
            return f"{node} drained: {reason}"
        if not failed and judged and current["state"] != "ready" and ours:
            client.resume(node)
            return f"{node} resumed: no check failed"
    return f"{node} left {current['state']}"


def _args(p: Parser) -> None:
    p.add_argument(
        "--checks", help="comma-separated: compute, memory, allreduce, gpu-inventory (default all)"
    )
    p.add_argument(
        "--node", default=socket.gethostname(), help="this node's name (default: hostname)"
    )
    p.add_argument("--gpus", type=int, help="GPUs the node declares (gpu-inventory)")
    p.add_argument("--baseline", help="baseline file (default RAILYARD_HOME/health/NODE.json)")
    p.add_argument(
        "--record-baseline", action="store_true", help="measure now and keep it as the baseline"
    )
    p.add_argument(
        "--fail-below", action="append", default=[], metavar="CHECK=FRACTION",
        help="fail below this fraction of the expected figure (default 0.8; repeat)",
    )  # fmt: skip
    p.add_argument(
        "--warn-below", action="append", default=[], metavar="CHECK=FRACTION",
        help="warn below this fraction (default 0.9; repeat)",
    )  # fmt: skip
    p.add_argument(
        "--drain", action="store_true", help="drain this node on a failure, resume it after (admin)"
    )
    json_flag(p)


COMMANDS = (Command("health", health, _args),)
