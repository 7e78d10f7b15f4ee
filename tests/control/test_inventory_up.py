"""What `railyard up` registers as this machine (control/server.inventory): declared CPUs, as
Slurm's ``CPUs=``, on a machine without a blueprint; refused beside a blueprint."""

from __future__ import annotations

from pathlib import Path

import pytest

from railyard.control.server import StartupError, UpConfig, inventory


def test_declared_cpus_are_this_machines_cores(tmp_path: Path) -> None:
    nodes, local = inventory(UpConfig(state_dir=tmp_path, gpus=2, cpus=16, node_name="vm"), False)
    assert local is not None
    assert [(n.name, n.gpus, n.cpu_cores) for n in nodes] == [("vm", 2, 16)]


def test_declared_cpus_with_a_blueprint_are_refused(tmp_path: Path) -> None:
    config = UpConfig(state_dir=tmp_path, cpus=16, blueprint="gaggle-h100", node_name="dgx001")
    with pytest.raises(StartupError, match=r"^--cpus: dgx001's cores are its node type's"):
        inventory(config, False)
