from __future__ import annotations

import pytest

from railyard.blueprint import GPUS, SWITCHES, load, preset_names
from railyard.blueprint.local import catalogue_name, local_blueprint_yaml

SEED_PRESETS = ["gaggle-h100", "rail-2048", "phy-h100-4x200", "a3-mega"]


def test_every_promised_preset_ships() -> None:
    assert set(SEED_PRESETS) <= set(preset_names())


@pytest.mark.parametrize("name", [*SEED_PRESETS, "local"])
def test_preset_validates_and_says_what_it_follows(name: str) -> None:
    bp = load(name).blueprint
    assert bp.name == name
    assert bp.follows, "every preset names the seed article it follows"


def test_gaggle_matches_seed_000() -> None:
    bp = load("gaggle-h100").blueprint
    dgx = bp.node_types["dgx-h100"]
    assert bp.node_groups["dgx"].count * dgx.gpus == 96
    assert dgx.nics is not None
    assert dgx.nics.count * dgx.nics.speed_gbit_s == 3200  # "3.2 Tbps per node"
    assert bp.storage["allflash"].per_client_gbyte_s == pytest.approx(10 * 2**30 / 1e9)  # 10 GiB/s
    roles = {g.role.value for g in bp.node_groups.values()}
    assert {"compute", "eval", "cpu", "login"} <= roles


def test_rail_2048_matches_seed_003() -> None:
    bp = load("rail-2048").blueprint
    assert bp.fabric is not None
    gpus = sum(bp.node_types[g.node_type].gpus * g.count for g in bp.node_groups.values())
    assert gpus == 2048
    assert bp.fabric.scalable_unit_gpus == 128
    assert len(bp.fabric.tiers) == 3
    assert (bp.fabric.design.value, bp.fabric.transport.value) == ("rail-optimized", "roce")
    assert bp.fabric.routing.value == "adaptive"


def test_catalogue_cites_every_figure() -> None:
    for name, spec in {**GPUS, **SWITCHES}.items():
        assert len(spec.source) > 20, f"{name} needs a source"


def test_h100_datasheet_figures() -> None:
    h100 = GPUS["H100-SXM-80GB"]
    assert h100.bf16_dense_tflops == pytest.approx(1979 / 2, rel=1e-3)  # sparsity doubles
    assert h100.nvlink_gbyte_s_per_dir * 2 == 900


def test_nvml_names_map_to_catalogue() -> None:
    assert catalogue_name("NVIDIA H100 80GB HBM3") == "H100-SXM-80GB"
    assert catalogue_name("NVIDIA RTX 6000 Ada Generation") == "RTX-6000-Ada-48GB"
    assert catalogue_name("Tesla T4") is None


def test_local_preset_describes_this_machine() -> None:
    import os

    text = local_blueprint_yaml()
    bp = load("local").blueprint
    assert "this-machine" in text
    assert bp.node_types["this-machine"].cpu_cores == (os.cpu_count() or 1)
    assert bp.fabric is None
