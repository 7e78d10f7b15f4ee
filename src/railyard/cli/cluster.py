"""Cluster commands: ``railyard nodes`` (and drain, resume) and ``railyard queues``."""

from __future__ import annotations

import argparse

from railyard.cli.args import Command, Parser, connect, emit_json, json_flag, subcommands
from railyard.cli.text import clock, table
from railyard.client.values import PRIORITY_CLASSES


def nodes(args: argparse.Namespace) -> None:
    """Nodes, their GPUs in use, and draining."""
    with connect() as client:
        rows = client.nodes()
    if args.json:
        emit_json(rows)
        return
    headers: tuple[str, ...] = ("NODE", "FLAVOR", "GPUS", "USED", "STATE", "HEALTH", "PATH",
                                "REASON")  # fmt: skip
    body = [
        [n["name"], n["flavor"], str(n["gpus"]), str(n["gpus_used"]), n["state"],
         n.get("health") or "-", "/".join(n["path"]), n["reason"]]
        for n in rows
    ]  # fmt: skip
    if any(n.get("features") for n in rows):  # sinfo's AVAIL_FEATURES, where there are some
        headers += ("FEATURES",)
        for line, n in zip(body, rows, strict=True):
            line.append(",".join(n.get("features") or []))
    print(table(headers, body))


def drain(args: argparse.Namespace) -> None:
    """Stop placing new work on a node (admin); running jobs finish."""
    with connect() as client:
        node = client.drain(args.name, args.reason)
    emit_json(node) if args.json else print(f"{node['name']} {node['state']}")


def resume(args: argparse.Namespace) -> None:
    """Return a drained node to service (admin)."""
    with connect() as client:
        node = client.resume(args.name)
    emit_json(node) if args.json else print(f"{node['name']} {node['state']}")


def _drain_args(p: Parser) -> None:
    p.add_argument("name", metavar="NODE")
    p.add_argument("--reason", default="", help="shown in `railyard nodes`")
    json_flag(p)


def _resume_args(p: Parser) -> None:
    p.add_argument("name", metavar="NODE")
    json_flag(p)


def _nodes_args(p: Parser) -> None:
    json_flag(p)
    subcommands(
        p, Command("drain", drain, _drain_args), Command("resume", resume, _resume_args),
        required=False,
    )  # fmt: skip


def _per_flavor(values: dict[str, int]) -> str:
    return " ".join(f"{f}={n}" for f, n in sorted(values.items())) or "-"


def _priority(value: int) -> str:
    """A class's name (``normal``), else the number."""
    return next((n for n, v in PRIORITY_CLASSES.items() if v == value), str(value))


def queues(args: argparse.Namespace) -> None:
    """Queues: quota per flavor, GPUs in use and borrowed, fair-share usage.

    As sinfo, the default partition's name ends in ``*`` and TIMELIMIT is its MaxTime."""
    with connect() as client:
        rows = client.queues()
    if args.json:
        emit_json(rows)
        return
    headers = ("QUEUE", "PARENT", "TIMELIMIT", "WEIGHT", "NOMINAL", "IN USE", "BORROWED",
               "USAGE GPU-h", "PENDING", "RUNNING", "MAX PRIO", "MEMBERS")  # fmt: skip
    body = [
        [
            q["name"] + ("*" if q.get("is_default") else ""),
            q["parent"] or "",
            clock(q["max_time_s"]) or "infinite",
            f"{q['weight']:g}",
            _per_flavor(q["nominal_gpus"]),
            _per_flavor(q["used_gpus"]),
            _per_flavor(q["borrowed_gpus"]),
            f"{q['usage_gpu_s'] / 3600:,.1f}",
            str(q["pending_jobs"]),
            str(q["running_jobs"]),
            _priority(q.get("max_priority", PRIORITY_CLASSES["normal"])),
            ",".join(q["members"]),
        ]
        for q in rows
    ]
    print(table(headers, body))


COMMANDS = (
    Command("nodes", nodes, _nodes_args),
    Command("queues", queues, json_flag),
)
