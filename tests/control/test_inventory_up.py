"""What `railyard up` registers as this machine (control/server.inventory): declared CPUs, as
Slurm's ``CPUs=``, on a machine without a blueprint; refused beside a blueprint."""

from __future__ import annotations

from pathlib import Path

import pytest

from railyard.control.server import (
    StartupError,
    UpConfig,
    bootstrap,
    declared_partitions,
    inventory,
)


def test_declared_cpus_are_this_machines_cores(tmp_path: Path) -> None:
    nodes, local = inventory(UpConfig(state_dir=tmp_path, gpus=2, cpus=16, node_name="vm"), False)
    assert local is not None
    assert [(n.name, n.gpus, n.cpu_cores) for n in nodes] == [("vm", 2, 16)]


def test_declared_cpus_with_a_blueprint_are_refused(tmp_path: Path) -> None:
    config = UpConfig(state_dir=tmp_path, cpus=16, blueprint="gaggle-h100", node_name="dgx001")
    with pytest.raises(StartupError, match=r"^--cpus: dgx001's cores are its node type's"):
        inventory(config, False)


def test_the_blueprints_partitions_are_declared_at_every_start(tmp_path: Path) -> None:
    """`up --blueprint` with a ``partitions:`` section: its partitions become queues below
    `default` on the first start, and the next start with an edited file follows it."""
    from railyard.control.store.database import Store, sqlite_url
    from railyard.control.store.tables import QueueRow

    path = tmp_path / "bp.yaml"
    nodes = (
        "name: t\nnode_types:\n  box: {gpu: H100-SXM-80GB, gpus: 8, power_w: 10000}\n"
        "node_groups:\n  n: {node_type: box, count: 2, hostname_prefix: gpu}\n"
    )
    path.write_text(nodes + "partitions:\n  gpu: {default: true}\n  debug: {max_time: '30:00'}\n")
    store = Store(sqlite_url(tmp_path / "railyard.db"))
    try:
        for file_text, wanted in (
            (None, {"gpu": (True, None), "debug": (False, 1800.0)}),
            (
                "  gpu: {}\n  debug: {default: true}\n",
                {"gpu": (False, None), "debug": (True, None)},
            ),
        ):
            if file_text is not None:
                path.write_text(nodes + "partitions:\n" + file_text)
            config = UpConfig(state_dir=tmp_path, blueprint=str(path), node_name="gpu001")
            found, local = inventory(config, False)
            bootstrap(store, found, local, partitions=declared_partitions(config))
            with store.session() as session:
                rows = {r.name: r for r in session.query(QueueRow)}
            assert {n: (r.is_default, r.max_time_s) for n, r in rows.items() if r.parent} == wanted
            assert rows["default"].nominal_gpus == {"H100-SXM-80GB": 16}
    finally:
        store.close()


def test_a_blueprints_node_features_reach_the_nodes_table(tmp_path: Path) -> None:
    from railyard.blueprint import BlueprintError, load_text
    from railyard.control.store.database import Store, sqlite_url
    from railyard.control.store.tables import NodeRow

    text = (
        "name: t\nnode_types:\n  box: {gpu: H100-SXM-80GB, gpus: 8, power_w: 10000}\n"
        "node_groups:\n  a: {node_type: box, count: 1, hostname_prefix: ib, features: [ib]}\n"
        "  b: {node_type: box, count: 1, hostname_prefix: eth}\n"
    )
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    config = UpConfig(state_dir=tmp_path, blueprint=str(path), node_name="ib001")
    found, local = inventory(config, False)
    store = Store(sqlite_url(tmp_path / "railyard.db"))
    try:
        bootstrap(store, found, local)
        with store.session() as session:
            rows = {r.name: r.features for r in session.query(NodeRow)}
    finally:
        store.close()
    assert rows == {"ib001": ["ib"], "eth001": None}
    with pytest.raises(
        BlueprintError,
        match=r"^bp.yaml:5: node_groups.a.features\[0\]: 'i b' is not a feature name",
    ):
        load_text(text.replace("[ib]", "['i b']"), file="bp.yaml")
