"""The nodes table under Ray, from what `ray.nodes()` reports (as `RayNode`s): machines that
join, leave and rejoin, matched to a blueprint, gated by health, and the default queue's quota.
The live cluster is exercised in tests/multinode; here the rules, on both stores."""

from __future__ import annotations

import time

from sqlalchemy import select

from railyard.control.raynodes import LEFT, NOT_JOINED, RayInventory
from railyard.control.store import Store
from railyard.control.tables import NodeRow, QueueRow
from railyard.exec.rayexec import RayNode, ray_nodes
from railyard.sched import Node
from railyard.sched.health import AWAITING_CHECK


def machine(name: str, alive: bool = True, gpus: int = 2) -> RayNode:
    return RayNode(name=name, gpus=gpus, flavor="virtual", alive=alive, address="10.0.0.1")


def rows(store: Store) -> dict[str, tuple[str, str]]:
    with store.session() as session:
        return {r.name: (r.state, r.reason) for r in session.scalars(select(NodeRow))}


def sync(store: Store, inventory: RayInventory, found: list[RayNode]) -> list[str]:
    with store.session() as session:
        return inventory.sync(session, found, time.time())


def test_machines_join_leave_and_rejoin(store: Store) -> None:
    with store.session() as session:
        session.add(QueueRow(name="default", nominal_gpus={}, created_t_s=time.time()))
    inventory = RayInventory()
    assert sync(store, inventory, [machine("a"), machine("b")]) == [
        "node a joined (2 x virtual)", "node b joined (2 x virtual)",
    ]  # fmt: skip
    assert rows(store) == {"a": ("ready", ""), "b": ("ready", "")}
    with store.session() as session:
        queue = session.get(QueueRow, "default")
        assert queue is not None
        assert queue.nominal_gpus == {"virtual": 4}  # grows with the machines
    assert sync(store, inventory, [machine("a"), machine("b", alive=False)]) == [
        "node b left Ray: down, its jobs requeued"
    ]
    assert rows(store)["b"] == ("down", LEFT)
    assert sync(store, inventory, [machine("a")]) == []  # gone from the list: still down
    assert sync(store, inventory, [machine("a"), machine("b")]) == ["node b rejoined"]
    assert rows(store)["b"] == ("ready", "")


def test_an_admins_quota_is_not_grown(store: Store) -> None:
    with store.session() as session:
        session.add(QueueRow(name="default", nominal_gpus={"virtual": 1}, created_t_s=0.0))
    sync(store, RayInventory(), [machine("a")])
    with store.session() as session:
        queue = session.get(QueueRow, "default")
        assert queue is not None
        assert queue.nominal_gpus == {"virtual": 1}


def test_with_a_blueprint_only_its_nodes_come_up(store: Store) -> None:
    now = time.time()
    with store.session() as session:
        session.add(NodeRow(name="gpu001", flavor="H100-SXM-80GB", gpus=8, path=["su0", "lg0"],
                            state="down", reason=NOT_JOINED, updated_t_s=now))  # fmt: skip
    blueprint = {"gpu001": Node("gpu001", "H100-SXM-80GB", 8, path=("su0", "lg0"))}
    inventory = RayInventory(blueprint)
    assert sync(store, inventory, [machine("gpu001"), machine("stray")]) == ["node gpu001 rejoined"]
    assert rows(store) == {"gpu001": ("ready", "")}  # the stray machine takes no job
    assert inventory.refused == {"stray"}


def test_under_a_health_gate_a_machine_joins_drained_until_checked(store: Store) -> None:
    sync(store, RayInventory(gate=True), [machine("a")])
    assert rows(store) == {"a": ("drained", AWAITING_CHECK)}


def test_ray_nodes_reads_the_joined_machines_from_ray_nodes_entries() -> None:
    entries = [
        {"Alive": True, "NodeManagerAddress": "10.0.0.2", "Resources": {
            "CPU": 8.0, "railyard_node:n1": 1000.0, "railyard_gpus": 8.0,
            "railyard_flavor:H100-SXM-80GB": 1.0}},
        {"Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {"CPU": 4.0}},  # head
        {"Alive": False, "NodeManagerAddress": "10.0.0.3", "Resources": {}},  # a dead one
    ]  # fmt: skip
    assert ray_nodes(entries) == [RayNode("n1", 8, "H100-SXM-80GB", True, "10.0.0.2")]
