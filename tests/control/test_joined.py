"""The nodes table of a backend whose machines join (Ray's, through `control.joined`): nodes
that join, leave and rejoin, blueprint nodes no machine has joined as yet, the health gate,
and the default queue's quota. The live cluster is exercised in tests/multinode; here the
rules, on both stores."""

from __future__ import annotations

import time

from sqlalchemy import select

from railyard.control.store.database import Store
from railyard.control.store.tables import NodeRow, QueueRow
from railyard.control.usecases.joined import NOT_JOINED, JoinedNodes, left_reason
from railyard.sched import Node
from railyard.sched.health import AWAITING_CHECK


def node(name: str, gpus: int = 2) -> Node:
    return Node(name, "virtual", gpus, path=("su0", name))


def rows(store: Store) -> dict[str, tuple[str, str]]:
    with store.session() as session:
        return {r.name: (r.state, r.reason) for r in session.scalars(select(NodeRow))}


def sync(store: Store, inventory: JoinedNodes, joined: list[Node]) -> list[str]:
    with store.session() as session:
        return inventory.sync(session, joined, time.time())


def test_machines_join_leave_and_rejoin(store: Store) -> None:
    with store.session() as session:
        session.add(QueueRow(name="default", nominal_gpus={}, created_t_s=time.time()))
    inventory = JoinedNodes("ray")
    assert sync(store, inventory, [node("a"), node("b")]) == [
        "node a joined (2 x virtual)", "node b joined (2 x virtual)",
    ]  # fmt: skip
    assert rows(store) == {"a": ("ready", ""), "b": ("ready", "")}
    with store.session() as session:
        queue = session.get(QueueRow, "default")
        assert queue is not None
        assert queue.nominal_gpus == {"virtual": 4}  # grows with the machines
    assert sync(store, inventory, [node("a")]) == ["node b left: down, its jobs requeued"]
    assert rows(store)["b"] == ("down", "ray: node left")  # stored: the reason stays Ray's
    assert sync(store, inventory, [node("a")]) == []  # still gone: still down
    assert sync(store, inventory, [node("a"), node("b")]) == ["node b rejoined"]
    assert rows(store)["b"] == ("ready", "")


def test_a_node_left_under_another_backend_is_not_brought_up(store: Store) -> None:
    """A node down for a reason this backend did not give (an admin's, another backend's)
    stays down when reported up."""
    with store.session() as session:
        session.add(NodeRow(name="a", flavor="virtual", gpus=2, path=["su0", "a"],
                            state="down", reason=left_reason("kube"), updated_t_s=0.0))  # fmt: skip
    assert sync(store, JoinedNodes("ray"), [node("a")]) == []
    assert rows(store) == {"a": ("down", "kube: node left")}


def test_an_admins_quota_is_not_grown(store: Store) -> None:
    with store.session() as session:
        session.add(QueueRow(name="default", nominal_gpus={"virtual": 1}, created_t_s=0.0))
    sync(store, JoinedNodes("ray"), [node("a")])
    with store.session() as session:
        queue = session.get(QueueRow, "default")
        assert queue is not None
        assert queue.nominal_gpus == {"virtual": 1}


def test_a_blueprint_node_no_machine_joined_as_comes_up_when_one_does(store: Store) -> None:
    now = time.time()
    with store.session() as session:
        session.add(NodeRow(name="gpu001", flavor="H100-SXM-80GB", gpus=8, path=["su0", "lg0"],
                            state="down", reason=NOT_JOINED, updated_t_s=now))  # fmt: skip
    gpu001 = Node("gpu001", "H100-SXM-80GB", 8, path=("su0", "lg0"))
    assert sync(store, JoinedNodes("ray"), [gpu001]) == ["node gpu001 rejoined"]
    assert rows(store) == {"gpu001": ("ready", "")}


def test_under_a_health_gate_a_machine_joins_drained_until_checked(store: Store) -> None:
    sync(store, JoinedNodes("ray", gate=True), [node("a")])
    assert rows(store) == {"a": ("drained", AWAITING_CHECK)}
