"""The ``railyard`` command: parse, call, print. Logic lives in the packages below."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from railyard import __version__
from railyard.blueprint import BlueprintError, LoadedBlueprint, load, preset_names
from railyard.cli import admin as admin_cli
from railyard.cli import jobs as jobs_cli
from railyard.cli import simulate as simulate_cli
from railyard.cli.perf import perf_app
from railyard.cli.render import print_compare, print_plan
from railyard.control.errors import ServiceError
from railyard.control.paths import default_state_dir
from railyard.control.server import UpConfig, serve
from railyard.fabric import export
from railyard.fabric.build import build_fabric
from railyard.fabric.hostlist import compress
from railyard.fabric.model import Fabric, FabricError
from railyard.fabric.svg import render_svg
from railyard.fabric.tree import topology_tree
from railyard.plan.report import compare_designs, make_plan
from railyard.sched import SchedulerConfig

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
def version() -> None:
    """Print the railyard version."""
    print(__version__)


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
                console.print(f"  {group}: {compress(members[group])}")
        return
    render = {
        TopologyFormat.SLURM_CONF: export.slurm_topology_conf,
        TopologyFormat.SLURM_YAML: export.slurm_topology_yaml,
        TopologyFormat.KUEUE: export.kueue_topology,
        TopologyFormat.KUEUE_LABELS: export.kueue_node_labels,
    }[fmt]
    print(render(tree), end="")


@app.command()
def up(
    gpus: Annotated[
        int | None, typer.Option(help="declare this many GPUs (default: what NVML finds)")
    ] = None,
    flavor: Annotated[str | None, typer.Option(help="GPU flavor name for declared GPUs")] = None,
    host: Annotated[str, typer.Option(help="address to bind; loopback by default")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="API port")] = 8765,
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL, e.g. postgresql+psycopg://host/db")
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option(help="jobs, logs and the SQLite store (default ~/.railyard)")
    ] = None,
    policy: Annotated[str, typer.Option(help="ordering policy: fairshare | fifo")] = "fairshare",
    backfill: Annotated[str, typer.Option(help="strict | none | easy | conservative")] = "easy",
    cycle_interval: Annotated[float, typer.Option(help="seconds between idle cycles")] = 2.0,
) -> None:
    """Start the control plane: store, scheduler loop and REST API, on this machine."""
    try:
        scheduler = SchedulerConfig(ordering=policy, backfill=backfill)
    except (KeyError, ValueError) as exc:
        fail(f"--policy/--backfill: {exc.args[0]} (hint: see railyard up --help)")
    if gpus is not None and gpus < 0:
        fail("--gpus: must be >= 0")
    config = UpConfig(
        state_dir=state_dir or default_state_dir(),
        database_url=database_url,
        host=host,
        port=port,
        gpus=gpus,
        flavor=flavor,
        cycle_interval_s=cycle_interval,
        scheduler=scheduler,
    )
    try:
        serve(config)
    except ServiceError as exc:  # a state directory or store that cannot be used
        fail(exc.line())


jobs_cli.register(app)
admin_cli.register(app)
app.add_typer(perf_app, name="perf")
simulate_cli.register(app)
