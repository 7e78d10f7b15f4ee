"""``scontrol show partition [NAME]`` and ``scontrol show node [NAME]`` as railyard spells them
(``railyard show partition|node [NAME]``): Slurm's ``Key=Value`` records, so a script that
greps ``MaxTime=`` or ``State=`` reads them. Keys railyard has no fact for are left out, not
made up. A partition is a queue without sub-queues (as ``sinfo`` lists them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from railyard.cli.args import connect, emit_json, fail
from railyard.cli.cluster import default_leaf, node_state, partitions_of
from railyard.cli.text import clock
from railyard.client.hostlists import compress_hostlist
from railyard.client.printable import printable

if TYPE_CHECKING:
    from railyard.client.wire import Node, Queue


def _record(lines: list[list[tuple[str, str]]]) -> str:
    """scontrol's layout: the first pair alone, the rest indented three spaces."""
    text = [" ".join(f"{k}={printable(v)}" for k, v in line) for line in lines]
    return "\n".join([text[0], *("   " + line for line in text[1:])])


def _time(limit_s: float | None, none: str) -> str:
    return none if limit_s is None else clock(limit_s)


def partition_record(queue: Queue, nodes: list[Node], default: str) -> str:
    """One partition: its nodes are those of its pool; totals count what they hold."""
    mine = [n for n in nodes if queue["name"] in {p.rstrip("*") for p in partitions_of(n, [queue])}]
    cpus = sum(n.get("cpus") or 0 for n in mine)
    gpus = sum(n["gpus"] for n in mine)
    up = any(n["state"] in ("ready", "draining") for n in mine)
    return _record([
        [("PartitionName", queue["name"])],
        [("AllowAccounts", queue["name"]), ("AllowQos", "ALL")],
        [("Default", "YES" if queue["name"] == default else "NO"),
         ("PriorityJobFactor", f"{queue['weight']:g}")],
        [("DefaultTime", _time(queue.get("default_time_s"), "NONE")),
         ("MaxTime", _time(queue["max_time_s"], "UNLIMITED"))],
        [("Nodes", compress_hostlist([n["name"] for n in mine]) or "(null)")],
        [("PreemptMode", "REQUEUE" if queue.get("priority_preemption") else "OFF")],
        [("State", "UP" if up else "DOWN"), ("TotalCPUs", str(cpus)),
         ("TotalNodes", str(len(mine)))],
        [("TRES", f"cpu={cpus},node={len(mine)}" + (f",gres/gpu={gpus}" if gpus else ""))],
    ])  # fmt: skip


def node_record(node: Node, queues: list[Queue]) -> str:
    """One node: sinfo's state in scontrol's upper case, its GPUs as Gres and in use."""
    state = node_state(node).upper()
    if node["state"] == "draining" and node["gpus_used"]:
        state = "MIXED+DRAIN"
    elif node["state"] in ("draining", "drained"):
        state = "IDLE+DRAIN"
    gres = f"gpu:{node['gpus']}" if node["gpus"] else "(null)"
    return _record([
        [("NodeName", node["name"])],
        [("CPUTot", str(node.get("cpus") or 0))],
        [("AvailableFeatures", ",".join(node.get("features") or []) or "(null)")],
        [("Gres", gres)],
        [("RealMemory", str(node.get("memory_mb") or 0))],
        [("State", state)],
        [("Partitions", ",".join(p.rstrip("*") for p in partitions_of(node, queues)) or "(null)")],
        [("AllocTRES", f"gres/gpu={node['gpus_used']}" if node["gpus_used"] else "")],
        [("Reason", node["reason"] or "(null)")],
    ])  # fmt: skip


def show_cluster(what: str, name: str | None, *, as_json: bool) -> None:
    """Print every partition (or node), or the one named; one named that does not exist is
    scontrol's "not found" line, exit 1."""
    with connect() as client:
        queues = client.queues()
        nodes = client.nodes()
    if what == "partition":
        leaves = [q for q in queues if q["name"] not in {p["parent"] for p in queues}]
        chosen = [q for q in leaves if name is None or q["name"] == name]
        if not chosen:
            fail(f"Partition {name} not found", 1)
        if as_json:
            emit_json(chosen)
            return
        default = default_leaf(queues)
        print("\n\n".join(partition_record(q, nodes, default) for q in chosen))
        return
    picked = [n for n in nodes if name is None or n["name"] == name]
    if not picked:
        fail(f"Node {name} not found", 1)
    if as_json:
        emit_json(picked)
        return
    print("\n\n".join(node_record(n, queues) for n in picked))
