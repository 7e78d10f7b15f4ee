"""What the Ray backend reports to the control plane, from what `ray.nodes()` says: the
machines up now that may take jobs, matched to the blueprint's nodes. The live cluster is
exercised in tests/multinode."""

from __future__ import annotations

import logging

import pytest

from railyard.exec.backend import Machine
from railyard.exec.ray.raybackend import admits, joined_nodes
from railyard.exec.ray.rayexec import ray_nodes
from railyard.sched import Node


def machine(name: str, alive: bool = True, gpus: int = 2) -> Machine:
    return Machine(name=name, gpus=gpus, flavor="virtual", alive=alive, address="10.0.0.1")


def test_without_a_blueprint_each_machine_up_is_a_node_of_its_own() -> None:
    found = [machine("a"), machine("b", alive=False)]
    assert joined_nodes(found, None, set()) == [Node("a", "virtual", 2, path=("su0", "a"))]


def test_with_a_blueprint_only_its_nodes_come_up_and_a_stray_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gpu001 = Node("gpu001", "H100-SXM-80GB", 8, path=("su0", "lg0"))
    blueprint = {"gpu001": gpu001}
    refused: set[str] = set()
    with caplog.at_level(logging.WARNING, logger="railyard.ray"):
        for _ in range(2):
            assert joined_nodes([machine("gpu001"), machine("stray")], blueprint, refused) == [
                gpu001  # the blueprint's node (flavor, path), not what the machine declared
            ]
    assert refused == {"stray"}
    assert [r.getMessage() for r in caplog.records] == [admits(blueprint, machine("stray"))]
    assert "hint: railyard join --node-name one of gpu001" in (
        admits(blueprint, machine("stray")) or ""
    )
    assert admits(blueprint, machine("gpu001")) is None


def test_ray_nodes_reads_the_joined_machines_from_ray_nodes_entries() -> None:
    entries = [
        {"Alive": True, "NodeManagerAddress": "10.0.0.2", "Resources": {
            "CPU": 8.0, "railyard_node:n1": 1000.0, "railyard_gpus": 8.0,
            "railyard_flavor:H100-SXM-80GB": 1.0}},
        {"Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {"CPU": 4.0}},  # head
        {"Alive": False, "NodeManagerAddress": "10.0.0.3", "Resources": {}},  # a dead one
    ]  # fmt: skip
    assert ray_nodes(entries) == [Machine("n1", 8, "H100-SXM-80GB", True, "10.0.0.2")]
