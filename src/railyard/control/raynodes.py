"""The live inventory under Ray: the machines that joined, matched to the blueprint's nodes.

With a blueprint (`railyard up --ray ADDR --blueprint FILE|PRESET`) its nodes are the
inventory (names, flavors, topology paths); a blueprint node no machine has joined as is
`down` ("no live machine"); a machine that joined under a name the blueprint lacks is refused
(logged once, never scheduled). Without one, each joined machine is a node of its own leaf
group, with the GPUs and flavor `railyard join` declared. A node whose machine leaves Ray goes
`down` ("ray: node left"), so the cycle requeues its jobs; when it rejoins it is `ready` again
(or, under a health gate, drained until its first check passes). An admin's drain of a live
node is kept. Every change is a compare-and-set on the state and reason read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from railyard.control.effects import record, request_wake
from railyard.control.tables import NodeRow, QueueRow
from railyard.exec.rayexec import RayNode
from railyard.sched import Node, NodeState
from railyard.sched.health import joining_state

log = logging.getLogger("railyard.ray")
LEFT = "ray: node left"
NOT_JOINED = "no live machine"
_OURS = (LEFT, NOT_JOINED)


@dataclass
class RayInventory:
    """Keeps the nodes table in step with the Ray cluster (called by the loop's thread)."""

    blueprint: dict[str, Node] | None = None
    gate: bool = False  # a node that joins waits for its first health check
    refused: set[str] = field(default_factory=set)

    def sync(self, session: Session, found: Sequence[RayNode], now_t_s: float) -> list[str]:
        """Apply what Ray sees now; returns one line per change."""
        alive = {n.name: n for n in found if n.alive}
        rows = {r.name: r for r in session.scalars(select(NodeRow))}
        known = list(rows.values())  # and the nodes this sync adds, for the default quota
        changes: list[str] = []
        for name, machine in sorted(alive.items()):
            if self.blueprint is not None and name not in self.blueprint:
                if name not in self.refused:
                    self.refused.add(name)
                    some = ", ".join(sorted(self.blueprint)[:4])
                    log.warning(
                        "a machine joined Ray as %r, which the blueprint has no node of; "
                        "it takes no job (hint: railyard join --node-name one of %s, ...)",
                        name, some,
                    )  # fmt: skip
                continue
            row = rows.get(name)
            state, reason = joining_state(self.gate)
            if row is None:
                node = self._node(machine)
                made = NodeRow(
                    name=name, flavor=node.flavor, gpus=node.gpus, cpu_cores=node.cpu_cores,
                    mem_gb=node.mem_gb, path=list(node.path), state=state.value,
                    reason=reason, updated_t_s=now_t_s,
                )  # fmt: skip
                _grow_default_queue(session, node, known)
                session.add(made)
                known.append(made)
                changes.append(f"node {name} joined ({node.gpus} x {node.flavor})")
            elif (
                row.state == NodeState.DOWN.value
                and row.reason in _OURS
                and _cas(session, row, state.value, reason, now_t_s)
            ):
                changes.append(f"node {name} rejoined")
        for name, row in sorted(rows.items()):
            if name in alive or row.state == NodeState.DOWN.value:
                continue
            if _cas(session, row, NodeState.DOWN.value, LEFT, now_t_s):
                changes.append(f"node {name} left Ray: down, its jobs requeued")
        for line in changes:
            record(session, now_t_s, "node", f"ray: {line}", None)
        if changes:
            request_wake(session)
        return changes

    def _node(self, machine: RayNode) -> Node:
        if self.blueprint is not None:
            return self.blueprint[machine.name]
        return Node(machine.name, machine.flavor, machine.gpus, path=("su0", machine.name))


def _cas(session: Session, row: NodeRow, state: str, reason: str, now_t_s: float) -> bool:
    done = session.execute(
        update(NodeRow)
        .where(NodeRow.name == row.name, NodeRow.state == row.state, NodeRow.reason == row.reason)
        .values(state=state, reason=reason, updated_t_s=now_t_s)
        .execution_options(synchronize_session=False)
    )
    return getattr(done, "rowcount", 0) == 1


def _grow_default_queue(session: Session, node: Node, before: Iterable[NodeRow]) -> None:
    """The `default` queue that `railyard up` made holds the whole inventory; while its
    quota still equals the GPUs of the nodes known before, a new node's GPUs are added (an
    admin's own quota is never touched)."""
    rows = list(before)
    queue = session.get(QueueRow, "default")
    if queue is None or node.gpus == 0:
        return
    had = sum(r.gpus for r in rows if r.flavor == node.flavor)
    nominal = dict(queue.nominal_gpus or {})
    if nominal.get(node.flavor, 0) == had:
        nominal[node.flavor] = had + node.gpus
        queue.nominal_gpus = nominal
