"""Slurm partitions declared as slurm.conf lines (`up --partition`) or in a blueprint's
``partitions:`` section: what is taken, and the one line each mistake gets."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from railyard.blueprint import BlueprintError, load_text
from railyard.blueprint.partitions import Partition, parse_partition
from railyard.cli import up
from railyard.control.server import StartupError, UpConfig, declared_partitions

NODES = """\
name: t
node_types:
  box: {gpu: H100-SXM-80GB, gpus: 8, power_w: 10000}
node_groups:
  n: {node_type: box, count: 2}
  i: {node_type: box, count: 1, pool: interactive}
"""


def test_a_slurm_conf_line_as_written() -> None:
    name, partition = parse_partition(
        "PartitionName=debug Nodes=ALL MaxTime=30:00 DefaultTime=10:00 Default=NO State=UP"
    )
    assert name == "debug"
    assert partition == Partition(max_time="30:00", default_time="10:00")
    assert (partition.max_time_s, partition.default_time_s, partition.default) == (
        1800.0,
        600.0,
        False,
    )


def test_the_bare_name_first_and_infinite() -> None:
    name, partition = parse_partition("gpu Default=yes MaxTime=INFINITE")
    assert (name, partition.default, partition.max_time_s) == ("gpu", True, None)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("", "empty (hint: e.g. 'debug MaxTime=30:00 Default=YES')"),
        ("a=b", "'a=b' is not a partition name (hint: PartitionName=gpu)"),
        ("gpu MaxTime=soon", "gpu: MaxTime: bad time 'soon' (hint: use MM, MM:SS"),
        ("gpu Default=maybe", "'Default=maybe': Default= is YES or NO"),
        ("gpu MaxTime", "'MaxTime' is not KEY=VALUE (hint: e.g. MaxTime=30:00)"),
        ("gpu Nodes=gpu[01-04]", "'Nodes=gpu[01-04]': railyard does not take Nodes= here"),
        ("gpu OverSubscribe=FORCE", "'OverSubscribe=FORCE': railyard does not take"),
        ("gpu 'MaxTime=1:00", "No closing quotation"),
    ],
)
def test_a_bad_line_is_one_line_with_a_hint(line: str, error: str) -> None:
    with pytest.raises(ValueError, match=r"^" + re.escape(error)) as caught:
        parse_partition(line)
    assert "\n" not in str(caught.value)


def test_a_blueprint_declares_partitions_on_its_pools() -> None:
    text = NODES + (
        "partitions:\n"
        "  gpu: {default: true, max_time: 2-00:00:00, default_time: '1:00:00'}\n"
        "  shell: {pool: interactive, max_time: '8:00:00'}\n"
    )
    partitions = load_text(text, file="bp.yaml").blueprint.partitions
    assert list(partitions) == ["gpu", "shell"]
    assert partitions["gpu"].max_time_s == 2 * 86400
    assert partitions["shell"].pool == "interactive"


@pytest.mark.parametrize(
    ("section", "error"),
    [
        (
            "  shell: {pool: interactiv}\n",
            "bp.yaml:8: partitions.shell.pool: unknown pool 'interactiv' "
            "(hint: did you mean 'interactive'?)",
        ),
        (
            "  a: {default: true}\n  b: {default: true}\n",
            "bp.yaml:9: partitions.b.default: a second default partition (after 'a')",
        ),
        ("  default: {}\n", "bp.yaml:8: partitions.default: partition 'default' is their parent"),
        ("  gpu: {max_time: soon}\n", "bp.yaml:8: partitions.gpu.max_time: bad time 'soon'"),
        ("  gpu: {nodes: all}\n", "bp.yaml:8: partitions.gpu.nodes: "),
    ],
)
def test_a_bad_partitions_section_names_its_line(section: str, error: str) -> None:
    with pytest.raises(BlueprintError) as caught:
        load_text(NODES + "partitions:\n" + section, file="bp.yaml")
    assert str(caught.value).startswith(error), caught.value


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--partition", "gpu Foo=1"], "railyard: up: --partition: 'Foo=1': railyard does not"),
        (
            ["--partition", "a", "--partition", "a"],
            "railyard: up: --partition: a is declared twice",
        ),
        (
            ["--partition", "a Default=YES", "--partition", "b Default=YES"],
            "railyard: up: --partition: b: a second Default=YES (after a)",
        ),
        (["--partition", "a Pool=x"], "railyard: up: --partition: a: Pool= needs a blueprint"),
    ],
)
def test_up_refuses_a_bad_partition_before_starting(
    args: list[str], error: str, tmp_path: object
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "railyard", "up", "--state-dir", str(tmp_path), "--port", "0",
         *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(error), done.stderr
    assert done.stderr.count("\n") == 1
    assert not list(tmp_path.iterdir())  # type: ignore[attr-defined]


BLUEPRINT = (
    "name: t\nnode_types:\n  box: {gpu: H100-SXM-80GB, gpus: 8, power_w: 10000}\n"
    "node_groups:\n  n: {node_type: box, count: 2, hostname_prefix: gpu}\n"
)


def test_up_refuses_partition_lines_beside_a_blueprint_that_declares_some(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bp.yaml"
    path.write_text(BLUEPRINT + "partitions:\n  gpu: {default: true}\n")
    state = tmp_path / "state"
    state.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "railyard", "up", "--state-dir", str(state), "--port", "0",
         "--blueprint", str(path), "--partition", "a"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "railyard: up: --partition: the blueprint declares partitions "
        "(hint: its partitions: section)\n"
    )
    assert not list(state.iterdir())


def test_partition_lines_beside_a_blueprint_without_partitions_are_declared(
    tmp_path: Path,
) -> None:
    """`up --blueprint FILE --partition ...` (issue 57 item 11): a blueprint that declares no
    partitions takes the lines, as a slurm.conf beside it would."""
    path = tmp_path / "bp.yaml"
    path.write_text(BLUEPRINT)
    args = argparse.Namespace(blueprint=str(path), partition=["gpu Default=YES", "debug"])
    lines = up._partitions(args)
    assert [name for name, _ in lines] == ["gpu", "debug"]
    config = UpConfig(state_dir=tmp_path, blueprint=str(path), partitions=lines)
    assert list(declared_partitions(config)) == ["gpu", "debug"]
    path.write_text(BLUEPRINT + "partitions:\n  big: {}\n")
    with pytest.raises(StartupError, match=r"^--partition: the blueprint declares partitions"):
        declared_partitions(config)
    assert list(declared_partitions(replace(config, partitions=()))) == ["big"]
