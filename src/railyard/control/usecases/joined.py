"""The live inventory of a backend whose machines join (Ray; Kubernetes to come): the nodes
table kept in step with what the backend reports (`railyard.exec.backend.NodeSink`).

The backend says which machines are up now, as scheduler nodes it has admitted (with a
blueprint, its nodes; a machine the blueprint lacks never gets here). A node first reported
is added (and the default queue grows with it); a node that is no longer reported goes
`down` ("<source>: node left"), so the cycle requeues its jobs; when it is reported again it
is `ready` (or, under a health gate, drained until its first check passes). A blueprint node
no machine has joined as was registered `down` ("no live machine") and comes up the same
way. An admin's drain of a live node is kept. Every change is a compare-and-set on the state
and reason read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from railyard.control.store.effects import record, request_wake
from railyard.control.store.tables import NodeRow, QueueRow
from railyard.sched import Node, NodeState
from railyard.sched.health import joining_state

NOT_JOINED = "no live machine"


def left_reason(source: str) -> str:
    """The reason a node that left is down with (``ray: node left``): stored, so kept."""
    return f"{source}: node left"


@dataclass
class JoinedNodes:
    """Keeps the nodes table in step with a backend's machines (called by the loop's thread).

    ``source`` names the backend in reasons and events; ``gate``: a node that joins waits for
    its first health check."""

    source: str
    gate: bool = False

    def sync(self, session: Session, joined: Sequence[Node], now_t_s: float) -> list[str]:
        """Apply what the backend sees now; returns one line per change."""
        alive = {n.name: n for n in joined}
        rows = {r.name: r for r in session.scalars(select(NodeRow))}
        known = list(rows.values())  # and the nodes this sync adds, for the default quota
        ours = (left_reason(self.source), NOT_JOINED)
        changes: list[str] = []
        for name, node in sorted(alive.items()):
            row = rows.get(name)
            state, reason = joining_state(self.gate)
            if row is None:
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
                and row.reason in ours
                and _cas(session, row, state.value, reason, now_t_s)
            ):
                changes.append(f"node {name} rejoined")
        for name, row in sorted(rows.items()):
            if name in alive or row.state == NodeState.DOWN.value:
                continue
            if _cas(session, row, NodeState.DOWN.value, ours[0], now_t_s):
                changes.append(f"node {name} left: down, its jobs requeued")
        for line in changes:
            record(session, now_t_s, "node", f"{self.source}: {line}", None)
        if changes:
            request_wake(session)
        return changes


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
