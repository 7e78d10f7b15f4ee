"""The design commands: ``plan``, ``topology``, ``presets``, ``perf`` and ``simulate`` (typer).

They compute for seconds on a blueprint, so typer's start-up (about 0.15 s to import and build
a command) is small beside their work; the control-plane commands, which must answer in
milliseconds, use :mod:`argparse` instead (:mod:`railyard.cli.main`). This module is imported
only when one of these commands runs, and each loads only its own packages.
"""

from __future__ import annotations

import functools
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from railyard.blueprint import BlueprintError, LoadedBlueprint, load, preset_names
from railyard.cli.render import print_compare, print_plan
from railyard.client.hostlists import compress_hostlist
from railyard.fabric import export
from railyard.fabric.build import build_fabric
from railyard.fabric.model import Fabric, FabricError
from railyard.fabric.svg import render_svg
from railyard.fabric.tree import topology_tree
from railyard.plan.report import compare_designs, make_plan

app = typer.Typer(
    help="railyard: plan, predict, schedule and operate shared GPU training clusters.",
    no_args_is_help=True,
    add_completion=False,
)
BlueprintArg = Annotated[
    str, typer.Argument(help="a preset name (see `railyard presets`) or a YAML file")
]


def fail(message: str) -> NoReturn:
    """One line on stderr and exit code 2: the contract for every bad input."""
    print(f"railyard: {message}", file=sys.stderr)
    raise typer.Exit(2)


def _load(name: str) -> LoadedBlueprint:
    try:
        return load(name)
    except BlueprintError as exc:
        fail(str(exc))


def _fabric(loaded: LoadedBlueprint) -> Fabric:
    try:
        return build_fabric(loaded.blueprint)
    except FabricError as exc:
        fail(str(loaded.source.error(exc.problem)))


@app.command()
def presets() -> None:
    """List the blueprints shipped with railyard."""
    console = Console()
    for name in [*preset_names(), "local"]:
        bp = load(name).blueprint
        console.print(f"[bold]{name:16}[/bold] {bp.description}")


@app.command()
def plan(
    blueprint: BlueprintArg,
    compare: Annotated[
        bool, typer.Option("--compare", help="the four designs side by side")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    svg: Annotated[Path | None, typer.Option(help="write a topology picture (SVG) here")] = None,
) -> None:
    """Bill of materials, cost, power and network figures of a cluster."""
    loaded = _load(blueprint)
    bp = loaded.blueprint
    try:
        result = make_plan(bp)
        rows = compare_designs(bp) if compare else []
    except FabricError as exc:
        fail(str(loaded.source.error(exc.problem)))
    if svg is not None:
        if bp.fabric is None:
            fail(f"{blueprint}: no fabric to draw (hint: the blueprint declares none)")
        svg.write_text(render_svg(_fabric(loaded), title=f"{bp.name}: {bp.description}"), "utf-8")
    if as_json:
        data = result.to_dict()
        if compare:
            data["compare"] = [row.__dict__ for row in rows]
        print(json.dumps(data, indent=2, default=str))
        return
    console = Console()
    print_plan(console, result)
    if compare:
        print_compare(console, bp.name, rows)
    if svg is not None:
        console.print(f"topology picture written to {svg}")


class TopologyFormat(StrEnum):
    TREE = "tree"
    SLURM_CONF = "slurm-conf"
    SLURM_YAML = "slurm-yaml"
    KUEUE = "kueue"
    KUEUE_LABELS = "kueue-labels"


@app.command()
def topology(
    blueprint: BlueprintArg,
    fmt: Annotated[TopologyFormat, typer.Option("--format", "-f")] = TopologyFormat.TREE,
) -> None:
    """Export the topology tree the scheduler places on (Slurm, Kueue, or plain)."""
    loaded = _load(blueprint)
    if loaded.blueprint.fabric is None:
        fail(f"{blueprint}: no fabric, so no topology (hint: add a fabric section)")
    tree = topology_tree(_fabric(loaded))
    if fmt == TopologyFormat.TREE:
        console = Console()
        for su, groups in tree.scalable_units().items():
            console.print(f"[bold]{su}[/bold]")
            members = tree.leaf_groups()
            for group in groups:
                console.print(f"  {group}: {compress_hostlist(members[group])}")
        return
    render = {
        TopologyFormat.SLURM_CONF: export.slurm_topology_conf,
        TopologyFormat.SLURM_YAML: export.slurm_topology_yaml,
        TopologyFormat.KUEUE: export.kueue_topology,
        TopologyFormat.KUEUE_LABELS: export.kueue_node_labels,
    }[fmt]
    print(render(tree), end="")


@functools.cache
def full_app() -> typer.Typer:
    """Every design command on one typer app (the tests drive it with typer's runner)."""
    from railyard.cli import simulate
    from railyard.cli.perf import perf_app

    app.add_typer(perf_app, name="perf")
    simulate.register(app)
    return app


def run(argv: list[str]) -> int:
    """``railyard NAME ...`` for a design command NAME; returns the exit code."""
    name, rest = argv[0], argv[1:]
    if name == "perf":
        from railyard.cli.perf import perf_app

        command, args = perf_app, rest
    elif name == "simulate":
        from railyard.cli import simulate

        command, args = typer.Typer(add_completion=False), rest
        simulate.register(command)  # one command: typer runs it without its name
    else:
        command, args = app, argv
    try:
        command(args=args, prog_name=f"railyard {name}" if command is not app else "railyard")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0
