"""The `railyard` command as a user runs it: real process for the error contract, in-process
runner for the rest (fast)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import yaml
from typer.testing import CliRunner

from railyard.cli.design import full_app

app = full_app()

runner = CliRunner(env={"COLUMNS": "160"})


def test_plan_gaggle_prints_checkable_figures() -> None:
    result = runner.invoke(app, ["plan", "gaggle-h100"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "96 x H100-SXM-80GB" in out
    assert "QM9700" in out
    assert "full bisection" in out
    assert "50 GB/s" in out  # 400 Gb/s per GPU


def test_plan_compare_rail_2048() -> None:
    result = runner.invoke(app, ["plan", "rail-2048", "--compare"])
    assert result.exit_code == 0, result.output
    for design in ("single", "tor-clos", "rail-only", "rail-optimized"):
        assert design in result.output
    assert "pxn" in result.output


def test_plan_json_is_machine_readable() -> None:
    result = runner.invoke(app, ["plan", "rail-2048", "--json", "--compare"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["gpus"] == 2048
    assert {row["design"] for row in data["compare"]} == {
        "single",
        "tor-clos",
        "rail-only",
        "rail-optimized",
    }
    assert data["network"]["worst_case_hops"] == 5


def test_plan_svg(tmp_path: Path) -> None:
    out = tmp_path / "gaggle.svg"
    result = runner.invoke(app, ["plan", "gaggle-h100", "--svg", str(out)])
    assert result.exit_code == 0, result.output
    root = ElementTree.fromstring(out.read_text())
    assert root.tag.endswith("svg")


def test_topology_exports() -> None:
    conf = runner.invoke(app, ["topology", "rail-2048", "--format", "slurm-conf"])
    assert conf.exit_code == 0
    assert "SwitchName=su0-lg0 Nodes=gpu[001-016]" in conf.output
    kueue = runner.invoke(app, ["topology", "rail-2048", "--format", "kueue"])
    assert yaml.safe_load(kueue.output)["kind"] == "Topology"


def test_presets_lists_all() -> None:
    result = runner.invoke(app, ["presets"])
    assert result.exit_code == 0
    for name in ("gaggle-h100", "rail-2048", "phy-h100-4x200", "a3-mega", "local"):
        assert name in result.output


def _railyard(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "railyard", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


def test_bad_yaml_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text("name: x\nnode_types:\n  box: {gpus: 8, power_w: 1\nnode_groups: {}\n")
    result = _railyard("plan", str(bad))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f"{bad}:" in lines[0]
    assert "hint:" in lines[0]


def test_unknown_key_suggests_nearest(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text(
        "name: x\nnode_types:\n  box: {gpu: H100-SXM-80GB, gpus: 8, power_watts: 10}\n"
        "node_groups:\n  g: {node_type: box, count: 1}\n"
    )
    result = _railyard("plan", str(bad))
    assert result.returncode == 2
    assert "c.yaml:3: node_types.box.power_watts: unknown key" in result.stderr
    assert "did you mean 'power_w'?" in result.stderr


def test_impossible_design_names_field_and_shortfall(tmp_path: Path) -> None:
    text = (
        "name: x\nnode_types:\n  box: {gpu: H100-SXM-80GB, gpus: 8, power_w: 10,\n"
        "        nics: {count: 8, speed_gbit_s: 400}}\n"
        "node_groups:\n  g: {node_type: box, count: 256}\n"
        "fabric:\n  design: rail-optimized\n  tiers:\n    - {switch: SN4700}\n"
        "    - {switch: SN4700}\n"
    )
    bad = tmp_path / "big.yaml"
    bad.write_text(text)
    result = _railyard("plan", str(bad))
    assert result.returncode == 2
    assert "big.yaml:11: fabric.tiers[1].switch:" in result.stderr
    assert "96 short" in result.stderr


def test_wrong_unit(tmp_path: Path) -> None:
    bad = tmp_path / "u.yaml"
    bad.write_text(
        "name: x\nnode_types:\n  box: {power_w: 10 TB}\nnode_groups:\n"
        "  g: {node_type: box, count: 1}\n"
    )
    result = _railyard("plan", str(bad))
    assert result.returncode == 2
    assert "u.yaml:3: node_types.box.power_w: '10 TB' is not a power" in result.stderr
