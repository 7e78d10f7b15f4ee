"""Cluster commands: ``railyard nodes`` (and drain, resume) and ``railyard queues``."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from railyard.cli.args import Command, Parser, connect, emit_json, json_flag, subcommands
from railyard.cli.text import clock, table
from railyard.client.printable import printable
from railyard.client.values import PRIORITY_CLASSES

if TYPE_CHECKING:
    from railyard.client.wire import Node, Queue


def nodes(args: argparse.Namespace) -> None:
    """Nodes, their GPUs in use, and draining."""
    with connect() as client:
        rows = client.nodes()
        queues = client.queues() if args.long and not args.json else []
    if args.json:
        emit_json(rows)
        return
    if args.long:
        print(sinfo_long(rows, queues, time.time()))
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


def node_state(node: Node) -> str:
    """sinfo's state: idle, mixed, allocated; draining while jobs run on a drained node."""
    used, state = node["gpus_used"], node["state"]
    if state == "ready":
        return "idle" if used == 0 else "allocated" if used >= node["gpus"] else "mixed"
    if state == "draining" and used == 0:
        return "drained"
    return state


def partitions_of(node: Node, queues: list[Queue]) -> list[str]:
    """The partitions (queues) whose jobs may run on ``node``: those of its pool (a flavor's
    ``@pool``; unpooled nodes: queues without one); a queue with sub-queues is no partition
    of its own (its jobs go to a sub-queue). The default one ends in ``*``, as sinfo marks it."""
    _, _, pool = node["flavor"].partition("@")
    parents = {q["parent"] for q in queues}
    default = default_leaf(queues)
    return [
        q["name"] + ("*" if q["name"] == default else "")
        for q in queues
        if q["name"] not in parents and (q.get("pool") or "") == pool
    ]


def default_leaf(queues: list[Queue]) -> str:
    """Where a job that names no partition goes: ``default``, then down the sub-queues marked
    default (``usecases.queuerules.default_partition``); sinfo marks it with ``*``, the one
    default partition, also when none is marked and ``default`` itself takes the jobs."""
    marked = {q["parent"]: q["name"] for q in queues if q.get("is_default") and q["parent"]}
    name, seen = "default", {"default"}
    while (child := marked.get(name)) is not None and child not in seen:
        name = child
        seen.add(name)
    return name


def sinfo_long(nodes: list[Node], queues: list[Queue], now_t_s: float) -> str:
    """``sinfo -N -l``: the time, then a line per node and partition, in sinfo's columns
    (S:C:T and TMP_DISK are not known to railyard: ``N/A`` and 0; WEIGHT 1)."""
    rows = [
        [n["name"], "1", part, node_state(n), str(n.get("cpus") or 0), "N/A",
         str(n.get("memory_mb") or 0), "0", "1", ",".join(n.get("features") or []) or "(null)",
         n["reason"] or "none"]
        for n in nodes
        for part in partitions_of(n, queues) or ["(null)"]
    ]  # fmt: skip
    headers = ("NODELIST", "NODES", "PARTITION", "STATE", "CPUS", "S:C:T", "MEMORY", "TMP_DISK",
               "WEIGHT", "AVAIL_FE", "REASON")  # fmt: skip
    widths = (0, 6, 0, 11, 4, 8, 6, 8, 6, 8, 20)  # sinfo's %.6D %.11T %.4c...: 0 fits the text
    body = [[printable(c) for c in row] for row in [list(headers), *rows]]
    lines = []
    for row in body:
        cells = []
        for i, (cell, width) in enumerate(zip(row, widths, strict=True)):
            fit = max(len(r[i]) for r in body) if width == 0 else width
            left = i in (0, 2, 10)  # NODELIST, PARTITION and REASON are left-justified
            cells.append(cell.ljust(fit) if left else cell.rjust(fit))
        lines.append(" ".join(cells).rstrip())
    return "\n".join([time.ctime(now_t_s), *lines])  # the time first, as ctime spells it


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
    p.add_argument("-N", "--Node", action="store_true", help="accepted for sinfo -N: a node a line")
    p.add_argument(
        "-l", "--long", action="store_true", help="sinfo -N -l's columns, a line per partition"
    )
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
    default = default_leaf(rows)
    body = [
        [
            q["name"] + ("*" if q["name"] == default else ""),
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
