"""``railyard perf``: what nccl-tests, a training run and a checkpoint will show, before buying."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from railyard.blueprint import Blueprint, BlueprintError, load
from railyard.fabric.build import build_fabric
from railyard.fabric.model import FabricError
from railyard.twin import checkpoint as ckpt
from railyard.twin.collective import CollectiveModel
from railyard.twin.models import PRESETS, Parallelism, preset
from railyard.twin.search import best_parallelism
from railyard.twin.train import StepEstimate, estimate_step
from railyard.twin.validate import validate_all

perf_app = typer.Typer(help="Predict collectives, training steps and checkpoints.")
OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}  # as nccl-tests parses


def fail(message: str) -> typer.Exit:
    typer.echo(f"railyard: {message}", err=True)
    return typer.Exit(2)


def parse_size(text: str, option: str) -> int:
    """``8``, ``256K``, ``8G``: nccl-tests' ``-b``/``-e`` sizes (binary multiples)."""
    match = _SIZE.match(text)
    if not match:
        raise fail(f"{option}: '{text}' is not a size (hint: write e.g. 8, 256K, 8G)")
    return int(float(match.group(1)) * _SCALE[match.group(2).upper()])


def _blueprint(name: str) -> Blueprint:
    try:
        bp = load(name).blueprint
    except BlueprintError as exc:
        raise fail(str(exc)) from None
    if bp.fabric is None or not bp.fabric_groups():
        raise fail(f"{name}: no GPU fabric to predict on (hint: use a preset with a fabric)")
    return bp


def _model(bp: Blueprint, routing: str | None = None) -> CollectiveModel:
    try:
        return CollectiveModel(bp, build_fabric(bp), routing=routing)
    except FabricError as exc:
        raise fail(exc.problem.message) from None


def _gpu(bp: Blueprint) -> tuple[str, int, int]:
    """(GPU model, GPUs per node, fabric nodes) of the blueprint's first fabric group."""
    _, _, node = bp.fabric_groups()[0]
    if node.gpu is None:
        raise fail("the fabric's nodes have no GPUs")
    return node.gpu, node.gpus, sum(g.count for _, g, _ in bp.fabric_groups())


@perf_app.command()
def collective(
    blueprint: Annotated[str, typer.Argument(help="preset name or YAML file")],
    op: Annotated[str, typer.Option("--op", "-o", help=f"{', '.join(OPS)} or all")] = "all_reduce",
    nodes: Annotated[int | None, typer.Option("--nodes", "-n", help="default: all")] = None,
    gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node", "-g")] = None,
    minbytes: Annotated[str, typer.Option("--minbytes", "-b")] = "8",
    maxbytes: Annotated[str, typer.Option("--maxbytes", "-e")] = "8G",
    stepfactor: Annotated[int, typer.Option("--stepfactor", "-f")] = 2,
    placement: Annotated[str, typer.Option(help="best, worst, or node indices 0,1,5")] = "best",
    algo: Annotated[str | None, typer.Option(help="ring, tree, nvls, nvls_tree, pxn")] = None,
    routing: Annotated[str | None, typer.Option(help="ecmp or adaptive")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """An nccl-tests sweep (``-b 8 -e 8G -f 2``) predicted on the blueprint's fabric."""
    bp = _blueprint(blueprint)
    _, per_node, total = _gpu(bp)
    n = nodes or total
    g = gpus_per_node or per_node
    if not 1 <= n <= total or not 1 <= g <= per_node:
        raise fail(f"--nodes/--gpus-per-node: at most {total} nodes x {per_node} GPUs")
    where: str | list[int] = placement
    if placement not in ("best", "worst"):
        try:
            where = [int(i) for i in placement.split(",")]
        except ValueError:
            raise fail("--placement: best, worst or comma-separated node indices") from None
    ops = OPS if op == "all" else (op,)
    if any(o not in OPS for o in ops):
        raise fail(f"--op: '{op}' is not one of {', '.join(OPS)} or all")
    if routing not in (None, "ecmp", "adaptive"):
        raise fail(f"--routing: '{routing}' is not ecmp or adaptive")
    model = _model(bp, routing)
    low, high = parse_size(minbytes, "-b"), parse_size(maxbytes, "-e")
    out: dict[str, Any] = {}
    for name in ops:
        try:
            rows = model.sweep(name, low, high, stepfactor, n, g, placement=where, algo=algo)
        except ValueError as exc:
            raise fail(str(exc)) from None
        out[name] = [dataclasses.asdict(r) for r in rows]
        if not as_json:
            _print_sweep(name, n, g, rows)
    if as_json:
        print(json.dumps(out, indent=2))


def _print_sweep(op: str, nodes: int, gpus_per_node: int, rows: list[Any]) -> None:
    print(f"# {op}: {nodes} nodes x {gpus_per_node} GPUs (predicted by railyard)")
    print(f"#{'size':>12} {'count':>12} {'type':>6} {'redop':>6} {'root':>5} "
          f"{'time':>10} {'algbw':>7} {'busbw':>7}  algo")  # fmt: skip
    print(f"#{'(B)':>12} {'(elements)':>12} {'':>6} {'':>6} {'':>5} "
          f"{'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7}")  # fmt: skip
    for r in rows:
        print(f" {r.size_bytes:>12} {r.count:>12} {r.type:>6} {r.redop:>6} {r.root:>5} "
              f"{r.time_us:>10.2f} {r.algbw_gbyte_s:>7.2f} {r.busbw_gbyte_s:>7.2f}  "
              f"{r.algo}/{r.protocol}")  # fmt: skip
    avg = sum(r.busbw_gbyte_s for r in rows) / len(rows)
    print(f"# Avg bus bandwidth    : {avg:.3f}\n")


def _step_dict(est: StepEstimate, tokens: float | None) -> dict[str, Any]:
    par = dataclasses.asdict(est.parallel)
    data = {
        "model": est.model, "gpus": est.gpus, "parallel": par, "fits": est.fits,
        "memory": est.memory.reason, "memory_needed_gbyte": est.memory.needed_bytes / 1e9,
        "step_time_s": est.step_time_s, "compute_s": est.compute_s, "bubble_s": est.bubble_s,
        "tp_comm_s": est.tp_comm_s, "pp_comm_s": est.pp_comm_s, "dp_comm_s": est.dp_comm_s,
        "mfu": est.mfu, "model_tflops_per_gpu": est.model_tflops_per_gpu,
        "hardware_tflops_per_gpu": est.hardware_tflops_per_gpu, "tokens_per_s": est.tokens_per_s,
    }  # fmt: skip
    if tokens:
        data["time_to_train_days"] = est.time_to_train_s(tokens) / 86400
    return data


@perf_app.command()
def train(
    blueprint: Annotated[str, typer.Argument(help="preset name or YAML file")],
    model: Annotated[str, typer.Option(help=f"one of {', '.join(PRESETS)}")] = "llama3-8b",
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    cp: int = 1,
    micro_batch: int = 1,
    global_batch: int = 512,
    interleave: int = 1,
    zero: Annotated[int, typer.Option(help="ZeRO stage 0-3")] = 0,
    distributed_optimizer: bool = False,
    recompute: Annotated[str, typer.Option(help="none, selective or full")] = "selective",
    sequence_parallel: bool = False,
    precision: Annotated[str, typer.Option(help="bf16 or fp8")] = "bf16",
    tokens: Annotated[float | None, typer.Option(help="tokens to train, e.g. 15e12")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Memory, step time, MFU and tokens/s of one training split, plus checkpoints."""
    bp = _blueprint(blueprint)
    gpu_name, per_node, total = _gpu(bp)
    try:
        arch = preset(model)
        par = Parallelism(tp=tp, pp=pp, dp=dp, cp=cp, micro_batch=micro_batch,
                          global_batch=global_batch, interleave=interleave, zero_stage=zero,
                          distributed_optimizer=distributed_optimizer,
                          recompute=recompute,  # type: ignore[arg-type]
                          sequence_parallel=sequence_parallel,
                          precision=precision)  # type: ignore[arg-type]  # fmt: skip
        par.check(arch)
    except (KeyError, ValueError) as exc:
        raise fail(f"{exc.args[0]} (hint: see railyard perf train --help)") from None
    if par.gpus > total * per_node:
        raise fail(f"tp x pp x dp x cp = {par.gpus} GPUs; {bp.name} has {total * per_node}")
    est = estimate_step(arch, par, bp.gpu_spec(gpu_name), per_node, _model(bp))
    data = _step_dict(est, tokens)
    data["checkpoint"] = _checkpoint(bp, arch.params(), par.gpus, per_node, est, tokens)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    console = Console()
    table = Table(title=f"{model} on {par.gpus} x {gpu_name} ({bp.name})", show_header=False)
    table.add_column("figure")
    table.add_column("value")
    for key, value in data.items():
        if key not in ("parallel", "checkpoint"):
            table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    for key, value in (data["checkpoint"] or {}).items():
        table.add_row(
            f"checkpoint {key}", f"{value:.4g}" if isinstance(value, float) else str(value)
        )
    console.print(table)


def _checkpoint(
    bp: Blueprint,
    params: float,
    gpus: int,
    per_node: int,
    est: StepEstimate,
    tokens: float | None,
) -> dict[str, float] | None:
    """Checkpoint size and time on the first storage system, Young's interval, goodput."""
    if not bp.storage:
        return None
    storage = next(iter(bp.storage.values()))
    nodes = -(-gpus // per_node)
    size = ckpt.checkpoint_bytes(params)
    write_s = ckpt.write_time_s(size, storage, nodes)
    restore_s = ckpt.restore_time_s(size, storage, nodes)
    work_s = est.time_to_train_s(tokens) if tokens else 30 * 86400.0
    good = ckpt.goodput(gpus, work_s, write_s, restore_s + 300.0)
    return {
        "size_gbyte": size / 1e9, "write_s": write_s, "restore_s": restore_s,
        "mtbf_h": ckpt.mtbf_s(gpus) / 3600, "young_interval_min": good.interval_s / 60,
        "goodput": good.useful,
    }  # fmt: skip


@perf_app.command()
def search(
    blueprint: Annotated[str, typer.Argument(help="preset name or YAML file")],
    model: Annotated[str, typer.Option(help=f"one of {', '.join(PRESETS)}")] = "llama3-8b",
    gpus: Annotated[int | None, typer.Option(help="default: every fabric GPU")] = None,
    global_batch: int = 512,
    top: int = 5,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The fastest (TP, PP, DP, micro-batch, recompute) splits that fit in memory."""
    bp = _blueprint(blueprint)
    gpu_name, per_node, total = _gpu(bp)
    try:
        arch = preset(model)
    except (KeyError, ValueError) as exc:
        raise fail(str(exc.args[0])) from None
    count = gpus or total * per_node
    found = best_parallelism(arch, count, bp.gpu_spec(gpu_name), per_node, _model(bp),
                             global_batch, top=top)  # fmt: skip
    rows = [_step_dict(e, None) for e in found]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        raise fail(f"no split of {model} fits {count} x {gpu_name} (hint: more GPUs)")
    table = Table(title=f"{model} on {count} x {gpu_name}: fastest splits that fit")
    for column in ("tp", "pp", "dp", "mbs", "v", "recompute", "step s", "MFU", "GB/GPU"):
        table.add_column(column, justify="right")
    for e in found:
        p = e.parallel
        table.add_row(str(p.tp), str(p.pp), str(p.dp), str(p.micro_batch), str(p.interleave),
                      p.recompute, f"{e.step_time_s:.3f}", f"{e.mfu:.1%}",
                      f"{e.memory.needed_bytes / 1e9:.1f}")  # fmt: skip
    Console().print(table)


@perf_app.command()
def validate(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Predicted vs published for every row of the shipped reference table."""
    checks = validate_all()
    if as_json:
        print(
            json.dumps(
                [
                    {
                        **dataclasses.asdict(c),
                        "error": c.error,
                        "target": c.target,
                        "within_target": c.within_target,
                    }
                    for c in checks
                ],
                indent=2,
            )
        )
        return
    table = Table(title="railyard perf validate: predicted vs published (data/perf_reference.csv)")
    for column in ("row", "kind", "quantity", "published", "predicted", "unit", "error", "ok"):
        table.add_column(
            column, justify="right" if column in ("published", "predicted", "error") else "left"
        )
    for c in checks:
        ok = "[green]yes[/green]" if c.within_target else f"[red]no (±{c.target:.0%})[/red]"
        table.add_row(
            c.row_id,
            c.kind,
            c.quantity,
            f"{c.published:.4g}",
            f"{c.predicted:.4g}",
            c.unit,
            f"{c.error:+.1%}",
            ok,
        )
    console = Console()
    console.print(table)
    within = sum(c.within_target for c in checks)
    console.print(f"{within} of {len(checks)} figures within target")
