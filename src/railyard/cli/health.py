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

    With --report (an admin's token), the run is stored in the control plane, which drains the
    node on a failure (the check and its figure as the reason), takes it down on a fatal error
    (its jobs requeued) and resumes it once a run passes. --history shows the stored runs.
    Record the baseline once, on the healthy, idle node: --record-baseline."""
    from railyard.health import baseline as baselines
    from railyard.health.checks import CHECKS, Context, record, run_checks

    if args.across or args.across_status:
        return across(args)
    if args.nodes:
        fail("--nodes goes with --across (hint: railyard health --across --nodes a,b)")
    if args.history:
        if not 1 <= args.limit <= 500:
            fail(f"--limit: {args.limit} is out of range (hint: 1 to 500)")
        return history(args.node, args.limit, args.json)
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
        flavor=args.flavor,
        declared_gpus=args.gpus,
        baseline=known,
        fail_below=fail_below,
        warn_below=warn_below,
    )
    results = run_checks(names, ctx)
    action = _report(args.node, results) if args.report else None
    if args.json:
        emit_json({"node": args.node, "results": [r.to_dict() for r in results], "action": action})
    else:
        _print(results)
        if action:
            print(action)
    return 1 if any(r.status.value == "fail" for r in results) else 0


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _print(results: list[Result]) -> None:
    num = _num
    headers = ("CHECK", "STATUS", "MEASURED", "EXPECTED", "RATIO", "UNIT", "SOURCE")
    rows = [
        [r.check, r.status.value.upper(), num(r.measured), num(r.expected), num(r.ratio),
         r.unit, r.source or r.detail]
        for r in results
    ]  # fmt: skip
    print(table(headers, rows))


def _report(node: str, results: list[Result]) -> str:
    """Send the run to the control plane, which stores it and applies the health rule
    (`railyard.sched.health`): a fatal error takes the node down and requeues its jobs, a
    failure drains it, a run where nothing fails resumes a node health took out. A node an
    admin drained for another reason is left alone, as NHC leaves a node whose note is not
    its own."""
    sent = [{k: v for k, v in r.to_dict().items() if k not in ("node", "ratio")} for r in results]
    with connect() as client:
        done = client.report_health(node, sent)
    return done["action"]


def history(node: str, limit: int, as_json: bool) -> int:
    with connect() as client:
        runs = client.health_history(node, limit)
    if as_json:
        emit_json(runs)
        return 0
    headers = ("WHEN", "VERDICT", "CHECK", "STATUS", "MEASURED", "EXPECTED", "UNIT", "DETAIL")
    rows = []
    for run in runs:
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(run["t_s"]))
        for i, r in enumerate(run["results"]):
            rows.append([
                when if i == 0 else "", (run["verdict"] or "skip") if i == 0 else "", r["check"],
                ("FATAL" if r["fatal"] else r["status"].upper()), _num(r["measured"]),
                _num(r["expected"]), r["unit"], r["detail"] or r["source"],
            ])  # fmt: skip
    print(table(headers, rows) if rows else f"no health runs of {node} yet")
    return 0


def across(args: argparse.Namespace) -> int:
    """Ask the control plane for an across-node sweep (or show it): all_reduce over the nodes,
    bisected to the slow ones (seed 004's hunt). Exit 1 when it blamed a node."""
    nodes = [n.strip() for n in (args.nodes or "").split(",") if n.strip()]
    if nodes and not args.across:
        fail("--nodes goes with --across, not --across-status (hint: --across --nodes a,b)")
    with connect() as client:
        state = client.ask_across(nodes) if args.across else client.across()
        print(f"across-node sweep over {len(state['nodes'])} nodes: {state['detail']}")
        while args.wait and state["active"]:
            time.sleep(1.0)
            state = client.across()
    if args.json:
        emit_json(state)
    elif state["tests"]:
        headers = ("GROUP", "BUSBW GB/s", "EXPECTED", "VERDICT", "SOURCE")
        rows = [
            [",".join(t["group"]), _num(t["busbw_gbps"]), _num(t["expected_gbps"]),
             "ok" if t["ok"] else "SLOW", t["detail"] or t["source"]]
            for t in state["tests"]
        ]  # fmt: skip
        print(table(headers, rows))
    if args.wait and not state["active"]:
        print(state["detail"])
    blamed = state["detail"].startswith("ended;") and not state["detail"].endswith("slow: none")
    return 1 if not state["active"] and blamed else 0


def _args(p: Parser) -> None:
    p.add_argument(
        "--checks",
        help="comma-separated: compute, memory, allreduce, gpu-gemm, nccl-allreduce, "
        "gpu-inventory, gpu-versions, gpu-xid, gpu-ecc, gpu-throttle, gpu-pcie (default all)",
    )
    p.add_argument(
        "--node", default=socket.gethostname(), help="this node's name (default: hostname)"
    )
    p.add_argument("--gpus", type=int, help="GPUs the node declares (gpu-inventory)")
    p.add_argument(
        "--flavor", help="the node's GPU flavor, e.g. H100-SXM-80GB: the twin's expectations"
    )
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
        "--report", "--drain", dest="report", action="store_true",
        help="store the run in the control plane, which drains the node on a failure, takes it "
        "down (requeueing its jobs) on a fatal error and resumes it once it passes (admin)",
    )  # fmt: skip
    p.add_argument(
        "--history", action="store_true", help="show the node's stored runs instead of checking"
    )
    p.add_argument("--limit", type=int, default=10, help="runs --history shows (default 10)")
    p.add_argument(
        "--across", action="store_true",
        help="ask the control plane for an all_reduce sweep across nodes, bisected to the slow "
        "ones (admin); the scheduler runs each test when its nodes are idle",
    )  # fmt: skip
    p.add_argument("--nodes", help="with --across: these nodes (comma-separated; default all)")
    p.add_argument("--wait", action="store_true", help="with --across: until the sweep ends")
    p.add_argument(
        "--across-status", action="store_true", help="show the sweep under way or the last one"
    )
    json_flag(p)


COMMANDS = (Command("health", health, _args),)
