"""``railyard sinfo``: partitions and nodes in sinfo's views, so a Slurm user's first command
and the scripts that parse it read what they expect: the default view (a line per partition
and state), ``-N`` (a line per node and partition), ``-N -l``, ``-s`` (``NODES(A/I/O/T)``),
``-R`` (why nodes are down or drained), ``-p``, ``-h`` and ``-o`` with sinfo's letters.
A partition is a queue without sub-queues, its nodes those of its pool."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from railyard.cli.args import Command, Parser, connect, emit_json, fail, json_flag
from railyard.cli.cluster import node_state, partitions_of, sinfo_long
from railyard.cli.letterformat import letter_lines
from railyard.cli.text import squeue_time
from railyard.client.hostlists import compress_hostlist

if TYPE_CHECKING:
    from railyard.client.wire import Node, Queue

COMPACT = {"idle": "idle", "mixed": "mix", "allocated": "alloc", "drained": "drain",
           "draining": "drng", "down": "down"}  # fmt: skip
"""sinfo's ``%t`` of the states ``node_state`` names (its ``%T``)."""
DEFAULT_FORMAT = "%9P %.5a %.10l %.6D %.6t %N"
SUMMARY_FORMAT = "%9P %.5a %.10l %.16F %N"
NODE_FORMAT = "%N %.6D %9P %.6t"
REASON_FORMAT = "%20E %19H %N"


class Group:
    """Nodes sinfo prints on one line (at least one): one partition, and (unless summarised)
    one state."""

    def __init__(self, partition: str, nodes: list[Node], queue: Queue | None) -> None:
        self.partition, self.nodes, self.queue = partition, nodes, queue

    def states(self) -> list[str]:
        return [node_state(n) for n in self.nodes]


def _counts(group: Group) -> str:
    """``A/I/O/T``: allocated (or mixed), idle, other (drained, down...), total."""
    states = group.states()
    busy = sum(s in ("allocated", "mixed") for s in states)
    idle = sum(s == "idle" for s in states)
    return f"{busy}/{idle}/{len(states) - busy - idle}/{len(states)}"


def _limit(group: Group) -> str:
    limit = group.queue["max_time_s"] if group.queue is not None else None
    return "infinite" if limit is None else squeue_time(limit)


def _gres(group: Group) -> str:
    gpus = group.nodes[0]["gpus"]
    return f"gpu:{gpus}" if gpus else "(null)"


FIELDS: dict[str, tuple[str, Callable[[Group], str]]] = {
    "P": ("PARTITION", lambda g: g.partition),
    "R": ("PARTITION", lambda g: g.partition.rstrip("*")),
    "a": ("AVAIL", lambda g: "up"),
    "l": ("TIMELIMIT", _limit),
    "D": ("NODES", lambda g: str(len(g.nodes))),
    "t": ("STATE", lambda g: COMPACT.get(g.states()[0], g.states()[0])),
    "T": ("STATE", lambda g: g.states()[0]),
    "F": ("NODES(A/I/O/T)", _counts),
    "N": ("NODELIST", lambda g: compress_hostlist([n["name"] for n in g.nodes])),
    "c": ("CPUS", lambda g: str(g.nodes[0].get("cpus") or 0)),
    "m": ("MEMORY", lambda g: str(g.nodes[0].get("memory_mb") or 0)),
    "G": ("GRES", _gres),
    "f": ("AVAIL_FEATURES", lambda g: ",".join(g.nodes[0].get("features") or []) or "(null)"),
    "E": ("REASON", lambda g: g.nodes[0]["reason"] or "none"),
    "H": ("TIMESTAMP", lambda g: "Unknown"),
    "u": ("USER", lambda g: "Unknown"),
}
"""sinfo's letters railyard has facts for; a group's nodes share what its first says, as
sinfo groups nodes whose fields print alike (``%c %m %G %f`` of a mixed group: its first)."""


def lines(fmt: str, groups: list[Group]) -> list[str]:
    """sinfo ``-o FORMAT``: a header, then a line per group. ValueError: one line."""
    values = {letter: value for letter, (_, value) in FIELDS.items()}
    headers = {letter: header for letter, (header, _) in FIELDS.items()}
    return letter_lines(fmt, groups, values, headers, option="-o")


def groups_of(
    nodes: list[Node], queues: list[Queue], *, by_state: bool, per_node: bool
) -> list[Group]:
    """sinfo's lines: per partition (the default partition starred), then per state unless
    summarised, or per node with ``-N``; partitions in the queues' order."""
    named = {q["name"]: q for q in queues}
    parts = {n["name"]: partitions_of(n, queues) for n in nodes}  # once a node, not per line
    if per_node:  # node by node, each in its partitions' order, as sinfo -N sorts
        return [Group(p, [n], named.get(p.rstrip("*"))) for n in nodes for p in parts[n["name"]]]
    members: dict[str, list[Node]] = {}
    for n in nodes:
        for partition in parts[n["name"]]:
            members.setdefault(partition, []).append(n)
    out: list[Group] = []
    for partition, held in members.items():
        queue = named.get(partition.rstrip("*"))
        if by_state:
            states = [node_state(n) for n in held]
            for state in dict.fromkeys(states):
                same = [n for n, s in zip(held, states, strict=True) if s == state]
                out.append(Group(partition, same, queue))
        else:
            out.append(Group(partition, held, queue))
    return out


def sinfo(args: argparse.Namespace) -> None:
    """Partitions and nodes as sinfo shows them: a line per partition and state (-N: per node)."""
    with connect() as client:
        nodes = client.nodes()
        queues = client.queues()
    wanted = {p for p in (args.partition or "").split(",") if p}
    if wanted:  # a node of another partition is not listed, nor that partition's lines
        nodes = [n for n in nodes if wanted & {p.rstrip("*") for p in partitions_of(n, queues)}]
    if args.json:
        emit_json({"nodes": nodes, "partitions": queues})
        return
    if args.list_reasons:
        nodes = [n for n in nodes if n["state"] not in ("ready",)]
    if args.Node and args.long and args.format is None:
        print(sinfo_long(nodes, queues, time.time()))
        return
    fmt = args.format or (
        REASON_FORMAT if args.list_reasons
        else NODE_FORMAT if args.Node
        else SUMMARY_FORMAT if args.summarize
        else DEFAULT_FORMAT
    )  # fmt: skip
    if args.list_reasons:
        found = [Group(n["reason"] or "none", [n], None) for n in nodes]
    else:
        found = groups_of(nodes, queues, by_state=not args.summarize, per_node=args.Node)
        if wanted:
            found = [g for g in found if g.partition.rstrip("*") in wanted]
    try:
        rows = lines(fmt, found)
    except ValueError as exc:
        fail(f"sinfo: {exc}")
    if args.long and not args.Node:
        print(time.ctime())
    print("\n".join(rows[1:] if args.noheader else rows))


def _sinfo_args(p: Parser) -> None:
    # sinfo's -h is --noheader; help stays at --help
    p.conflict_handler = p._optionals.conflict_handler = "resolve"
    p.add_argument("-N", "--Node", action="store_true", help="a line per node and partition")
    p.add_argument("-l", "--long", action="store_true", help="with -N: sinfo -N -l's columns")
    p.add_argument("-s", "--summarize", action="store_true", help="NODES(A/I/O/T) per partition")
    p.add_argument("-R", "--list-reasons", action="store_true", help="why nodes are out")
    p.add_argument("-p", "--partition", metavar="PARTS", help="only these partitions: a,b")
    p.add_argument("-o", "--format", metavar="FORMAT", help='sinfo\'s, e.g. "%%P %%a %%l %%D %%N"')
    p.add_argument("-h", "--noheader", action="store_true", help="no header line")
    json_flag(p)


COMMANDS = (Command("sinfo", sinfo, _sinfo_args),)
