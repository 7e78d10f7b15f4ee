"""``railyard perf``: what nccl-tests, a training run and a checkpoint will show, before buying.

Each command imports the performance model when it runs, so ``railyard --help`` stays fast.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from railyard.cli.perf_validate import validate

if TYPE_CHECKING:
    from railyard.blueprint import Blueprint
    from railyard.twin.collective import CollectiveModel
    from railyard.twin.models import LlmArch, Parallelism
    from railyard.twin.train import StepEstimate

perf_app = typer.Typer(help="Predict collectives, training steps and checkpoints.")
OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast")
PRESET_HELP = "a preset (llama3-8b, llama3-70b, llama3-405b, gpt3-175b, megatron-*, gpt-22b)"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}  # as nccl-tests parses
GIB = 2.0**30


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
    from railyard.blueprint import BlueprintError, load

    try:
        bp = load(name).blueprint
    except BlueprintError as exc:
        raise fail(str(exc)) from None
    if not any(n.gpu and n.gpus for _, _, n in bp.fabric_groups()) and not _local_gpu(bp):
        raise fail(f"{name}: no GPUs to predict on (hint: use a preset with GPUs, e.g. "
                   "gaggle-h100, or a blueprint file)")  # fmt: skip
    return bp


def _local_gpu(bp: Blueprint) -> tuple[str, int] | None:
    """(GPU model, count) of a fabric-less blueprint's first GPU node (the local preset)."""
    for group in bp.node_groups.values():
        node = bp.node_types[group.node_type]
        if node.gpu and node.gpus:
            return node.gpu, node.gpus
    return None


def _model(bp: Blueprint, routing: str | None = None) -> CollectiveModel:
    from railyard.fabric.build import build_fabric
    from railyard.fabric.model import FabricError
    from railyard.twin.collective import CollectiveModel
    from railyard.twin.reference import single_node_blueprint

    if bp.fabric is None or not bp.fabric_groups():
        gpu, count = _local_gpu(bp) or ("", 0)
        bp = single_node_blueprint(gpu, count)
    try:
        return CollectiveModel(bp, build_fabric(bp), routing=routing)
    except FabricError as exc:
        raise fail(exc.problem.message) from None


def _gpu(bp: Blueprint) -> tuple[str, int, int]:
    """(GPU model, GPUs per node, nodes) of the fabric's first group (or the local node)."""
    if bp.fabric is None or not bp.fabric_groups():
        gpu, count = _local_gpu(bp) or ("", 0)
        return gpu, count, 1
    _, _, node = bp.fabric_groups()[0]
    if node.gpu is None:
        raise fail("the fabric's nodes have no GPUs")
    return node.gpu, node.gpus, sum(g.count for _, g, _ in bp.fabric_groups())


def _band_line(kind: str, gpu: str | None = None, quantity: str = "throughput") -> str:
    from railyard.twin.bands import band_for

    band = band_for(kind, gpu)
    return band.describe(quantity) if band else "perf validate: no published rows of this kind"


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
    kind = "collective on one node" if n == 1 else "collective across nodes"
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
    else:
        print(f"# {_band_line(kind, quantity='busbw')}")


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


# --- perf train -------------------------------------------------------------------------------

ModelOpt = Annotated[str | None, typer.Option("--model", help=PRESET_HELP)]
ModelFileOpt = Annotated[
    str | None, typer.Option("--model-file", help="YAML or JSON with layers, hidden, heads, ...")
]
DimOpt = Annotated[int | None, typer.Option()]


def _arch(model: str | None, model_file: str | None, dims: Mapping[str, object]) -> LlmArch:
    """The architecture from a preset, a model file and/or dimension options."""
    from railyard.twin.modelfile import ModelFileError, load_model_file
    from railyard.twin.spec import SpecError, arch_from_fields

    given = {k: v for k, v in dims.items() if v is not None}
    if model and model_file:
        raise fail("--model and --model-file: give one (hint: base= in the file picks a preset)")
    try:
        if model_file:
            arch = load_model_file(model_file)
            return (
                arch_from_fields({"base": "llama3-8b", **_as_fields(arch), **given})
                if (given)
                else arch
            )
        if model or not given:
            return arch_from_fields({"base": model or "llama3-8b", **given})
        return arch_from_fields(given)
    except ModelFileError as exc:
        raise fail(str(exc)) from None
    except SpecError as exc:
        option = "--" + exc.field.replace("_", "-")
        hint = f" (hint: {exc.hint})" if exc.hint else ""
        raise fail(f"{option}: {exc.message}{hint}") from None


def _as_fields(arch: LlmArch) -> dict[str, object]:
    return {
        "name": arch.name, "layers": arch.layers, "hidden": arch.hidden, "heads": arch.heads,
        "kv_heads": arch.kv_heads, "kv_channels": arch.kv_channels,
        "ffn_hidden": arch.ffn_hidden, "ffn_kind": arch.mlp, "vocab": arch.vocab,
        "seq_len": arch.seq_len, "experts": arch.experts, "top_k": arch.top_k,
        "moe_ffn_hidden": arch.moe_ffn_hidden, "tied_embeddings": arch.tied_embeddings,
        "positions": "learned" if arch.learned_positions else "rope", "biases": arch.biases,
        "dropout": arch.dropout,
    }  # fmt: skip


@perf_app.command()
def train(
    blueprint: Annotated[str, typer.Argument(help="preset name, YAML file, or local")],
    model: ModelOpt = None,
    model_file: ModelFileOpt = None,
    layers: DimOpt = None,
    hidden: DimOpt = None,
    heads: DimOpt = None,
    kv_heads: DimOpt = None,
    ffn_hidden: DimOpt = None,
    ffn_kind: Annotated[str | None, typer.Option(help="gelu or swiglu")] = None,
    vocab: DimOpt = None,
    seq_len: DimOpt = None,
    experts: Annotated[int | None, typer.Option(help="MoE: routed experts per layer")] = None,
    top_k: Annotated[int | None, typer.Option(help="MoE: experts per token")] = None,
    moe_ffn_hidden: Annotated[int | None, typer.Option(help="MoE: one expert's width")] = None,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    cp: int = 1,
    ep: Annotated[int, typer.Option(help="expert parallel size (MoE)")] = 1,
    etp: Annotated[
        int,
        typer.Option(
            help="tensor parallel size inside each expert (0: tp); ep x etp "
            "divides tp x dp x cp, so ep may exceed dp"
        ),
    ] = 0,
    micro_batch: int = 1,
    global_batch: int = 512,
    interleave: Annotated[int, typer.Option(help="virtual pipeline stages per GPU (v)")] = 1,
    stage_layers: Annotated[
        str | None, typer.Option(help="layers per pipeline stage, e.g. 7,8x14,7")
    ] = None,
    zero: Annotated[int, typer.Option(help="ZeRO stage 0-3")] = 0,
    distributed_optimizer: bool = False,
    recompute: Annotated[str, typer.Option(help="none, selective or full")] = "selective",
    sequence_parallel: bool = False,
    precision: Annotated[str, typer.Option(help="bf16 or fp8")] = "bf16",
    fp8_recipe: Annotated[
        str, typer.Option(help="fp8 scaling: delayed, current (tensorwise), block or mxfp8")
    ] = "delayed",
    autocast: Annotated[
        bool | None,
        typer.Option("--autocast/--no-autocast", help="eager: bf16 autocast or pure bf16"),
    ] = None,
    dispatcher: Annotated[
        str, typer.Option(help="MoE token dispatcher: alltoall, deepep or hybridep")
    ] = "alltoall",
    implementation: Annotated[str, typer.Option(help="eager, megatron or megatron-te")] = (
        "megatron-te"
    ),
    attention: Annotated[str | None, typer.Option(help="flash2, flash3, cudnn or unfused")] = None,
    fused_loss: Annotated[bool | None, typer.Option("--fused-loss/--unfused-loss")] = None,
    cuda_graphs: bool = False,
    optimizer: Annotated[
        str | None, typer.Option(help="Adam kernels: fused, or foreach (torch's default)")
    ] = None,
    overlap_tp: Annotated[bool, typer.Option("--overlap-tp/--no-overlap-tp")] = False,
    overlap_dp: Annotated[bool, typer.Option("--overlap-dp/--no-overlap-dp")] = True,
    overlap_pp: Annotated[bool, typer.Option("--overlap-pp/--no-overlap-pp")] = False,
    overlap_ep: Annotated[bool, typer.Option("--overlap-ep/--no-overlap-ep")] = False,
    calibration: Annotated[str | None, typer.Option(help="file from railyard perf calibrate")] = (
        None
    ),
    tokens: Annotated[float | None, typer.Option(help="tokens to train, e.g. 15e12")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Memory per stage, step time with its error band, MFU and tokens/s of one split."""
    from railyard.twin.calibration import CalibrationError, load
    from railyard.twin.train import estimate_step

    bp = _blueprint(blueprint)
    gpu_name, per_node, total = _gpu(bp)
    dims = dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                ffn_hidden=ffn_hidden, ffn_kind=ffn_kind, vocab=vocab, seq_len=seq_len,
                experts=experts, top_k=top_k, moe_ffn_hidden=moe_ffn_hidden)  # fmt: skip
    arch = _arch(model, model_file, dims)
    par = _split(arch, dict(
        tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, fp8_recipe=fp8_recipe, autocast=autocast,
        dispatcher=dispatcher,
        micro_batch=micro_batch, global_batch=global_batch,
        interleave=interleave, zero_stage=zero, distributed_optimizer=distributed_optimizer,
        recompute=recompute, sequence_parallel=sequence_parallel, precision=precision,
        implementation=implementation, attention=attention or "", fused_loss=fused_loss,
        cuda_graphs=cuda_graphs, optimizer=optimizer or "", overlap_tp_comm=overlap_tp,
        overlap_dp_comm=overlap_dp, overlap_pp_comm=overlap_pp, overlap_ep_comm=overlap_ep,
    ), stage_layers)  # fmt: skip
    if par.gpus > total * per_node:
        raise fail(f"tp x pp x dp x cp = {par.gpus} GPUs; {bp.name} has {total * per_node}")
    cal = None
    if calibration:
        try:
            cal = load(calibration)
        except CalibrationError as exc:
            raise fail(str(exc)) from None
    est = estimate_step(arch, par, bp.gpu_spec(gpu_name), per_node, _model(bp),
                        gpu_name=gpu_name, calibration=cal)  # fmt: skip
    data = _step_dict(est, tokens, gpu_name)
    data["checkpoint"] = _checkpoint(bp, arch.params(), par.gpus, per_node, est, tokens)
    if cal is not None:
        data["calibration"] = {"file": calibration, "device": cal.device}
    if as_json:
        print(json.dumps(data, indent=2))
        return
    _print_train(arch.name, gpu_name, bp.name, par, est, data)


def _split(arch: LlmArch, fields: dict[str, Any], stages: str | None) -> Parallelism:
    from railyard.twin.fp8 import recipe_name
    from railyard.twin.implementation import implementation as check_impl
    from railyard.twin.models import Parallelism
    from railyard.twin.spec import SpecError, expand_stages

    try:
        if stages:
            fields["stage_layers"] = expand_stages(stages)
        check_impl(fields["implementation"], attention=fields["attention"] or None,
                   optimizer=fields["optimizer"] or None,
                   autocast=fields.get("autocast"))  # fmt: skip
        recipe_name(fields.get("fp8_recipe", "delayed"))  # ValueError names the known ones
        if fields.get("dispatcher", "alltoall") not in ("alltoall", "deepep", "hybridep"):
            raise ValueError(f"dispatcher {fields['dispatcher']!r} is not alltoall, deepep or "
                             "hybridep")  # fmt: skip
        if fields["recompute"] not in ("none", "selective", "full"):
            raise ValueError(f"recompute {fields['recompute']!r} is not none, selective or full")
        if fields["precision"] not in ("bf16", "fp8"):
            raise ValueError(f"precision {fields['precision']!r} is not bf16 or fp8")
        par = Parallelism(**fields)
        par.check(arch)
    except SpecError as exc:
        raise fail(f"--stage-layers: {exc.message} (hint: {exc.hint})") from None
    except ValueError as exc:
        raise fail(f"{exc.args[0]} (hint: see railyard perf train --help)") from None
    return par


def _step_dict(est: StepEstimate, tokens: float | None, gpu_name: str) -> dict[str, Any]:
    from railyard.twin.bands import band_for

    mem = est.memory
    band = band_for("training", gpu_name, moe=est.moe)
    data: dict[str, Any] = {
        "model": est.model, "gpus": est.gpus, "parallel": dataclasses.asdict(est.parallel),
        "implementation": est.implementation, "attention_backend": est.attention_backend,
        "step_time_s": est.step_time_s, "interleave": est.parallel.interleave,
        "bubble_fraction": est.bubble_fraction, "compute_s": est.compute_s,
        "bubble_s": est.bubble_s, "tp_comm_s": est.tp_comm_s, "pp_comm_s": est.pp_comm_s,
        "dp_comm_s": est.dp_comm_s, "mfu": est.mfu,
        "model_tflops_per_gpu": est.model_tflops_per_gpu,
        "hardware_tflops_per_gpu": est.hardware_tflops_per_gpu,
        "tokens_per_s": est.tokens_per_s, "breakdown_s": est.breakdown,
        "fits": est.fits, "memory": mem.reason, "memory_needed_gib": mem.needed_bytes / GIB,
        "memory_capacity_gib": mem.capacity_bytes / GIB,
        "memory_per_stage_gib": [
            {"stage": s.stage, "layers": s.layers,
             "layers_states": s.layer_states.total_bytes / GIB,
             "with_tables_states": s.states.total_bytes / GIB,
             "activations": s.activations_bytes / GIB,
             "logits_and_loss": (s.logits_bytes + s.loss_temp_bytes) / GIB,
             "total": s.total_bytes / GIB}
            for s in mem.stages
        ],
    }  # fmt: skip
    if band is not None:
        low, high = band.time_range(est.step_time_s)
        data["error_band"] = {
            "kind": band.kind, "rows": band.rows, "sources": band.sources, "low": band.low,
            "high": band.high, "median": band.median, "coverage": band.coverage,
            "interval": list(band.interval), "calibrated": band.half_width is not None,
            "step_time_s_range": [low, high], "text": band.describe(),
            "expected_step_time_s": band.expected_time_s(est.step_time_s),
        }  # fmt: skip
    if tokens:
        data["time_to_train_days"] = est.time_to_train_s(tokens) / 86400
    return data


def _print_train(
    model: str, gpu: str, bp_name: str, par: Parallelism, est: StepEstimate, data: dict[str, Any]
) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    title = f"{model} on {par.gpus} x {gpu} ({bp_name}): {est.implementation}"
    table = Table(title=title, show_header=False)
    table.add_column("figure")
    table.add_column("value")
    band = data.get("error_band")
    step = f"{est.step_time_s:.4g} s"
    if band:
        lo, hi = band["step_time_s_range"]
        what = f"{band['coverage']:.0%} interval" if band["calibrated"] else "range seen"
        if band["expected_step_time_s"] is not None:
            step += f"; published runs imply {band['expected_step_time_s']:.4g} s"
        step += f"  ({what}: {lo:.4g}-{hi:.4g} s; {band['text']})"
    rows = [
        ("split", f"TP{par.tp} PP{par.pp} DP{par.dp} CP{par.cp} EP{par.ep} mbs "
                  f"{par.micro_batch} gbs {par.global_batch}, {par.micro_batches} micro-batches"),
        ("interleave (v)", f"{par.interleave}; bubble {est.bubble_fraction:.1%} of ideal"),
        ("attention", est.attention_backend), ("step time", step),
        ("MFU", f"{est.mfu:.1%}"), ("model TFLOP/s per GPU", f"{est.model_tflops_per_gpu:.1f}"),
        ("tokens/s", f"{est.tokens_per_s:,.0f}"),
        ("where the time goes", ", ".join(f"{k} {v * 1e3:.1f} ms"
                                          for k, v in est.breakdown.items() if v > 1e-6)),
        ("memory", f"{est.memory.reason}; {_band_line('memory', quantity='bytes')}"),
    ]  # fmt: skip
    if "time_to_train_days" in data:
        rows.append(("time to train", f"{data['time_to_train_days']:.1f} days"))
    for key, value in (data.get("checkpoint") or {}).items():
        rows.append((f"checkpoint {key}", f"{value:.4g}"))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    stages = Table(title="memory per pipeline stage (GiB)")
    for col in ("stages", "layers", "layer states", "with tables", "activations",
                "logits+loss", "total"):  # fmt: skip
        stages.add_column(col, justify="right")
    for first, last, s in _grouped(data["memory_per_stage_gib"]):
        name = str(first) if first == last else f"{first}-{last}"
        stages.add_row(name, str(s["layers"]), f"{s['layers_states']:.1f}",
                       f"{s['with_tables_states']:.1f}", f"{s['activations']:.1f}",
                       f"{s['logits_and_loss']:.1f}", f"{s['total']:.1f}")  # fmt: skip
    console.print(stages)


def _grouped(stages: list[dict[str, Any]]) -> list[tuple[int, int, dict[str, Any]]]:
    """Consecutive stages with the same figures, as (first, last, figures)."""
    out: list[tuple[int, int, dict[str, Any]]] = []
    for s in stages:
        same = {k: round(v, 2) for k, v in s.items() if k != "stage"}
        if out and {k: round(v, 2) for k, v in out[-1][2].items() if k != "stage"} == same:
            out[-1] = (out[-1][0], s["stage"], out[-1][2])
        else:
            out.append((s["stage"], s["stage"], s))
    return out


def _checkpoint(
    bp: Blueprint, params: float, gpus: int, per_node: int, est: StepEstimate,
    tokens: float | None,
) -> dict[str, float] | None:  # fmt: skip
    """Checkpoint size and time on the first storage system, Young's interval, goodput."""
    from railyard.twin import checkpoint as ckpt

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
    model: ModelOpt = None,
    model_file: ModelFileOpt = None,
    gpus: Annotated[int | None, typer.Option(help="default: every fabric GPU")] = None,
    global_batch: int = 512,
    top: int = 5,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The fastest splits that fit in memory, with the distributed-optimizer setting shown."""
    from rich.console import Console
    from rich.table import Table

    from railyard.twin.search import best_parallelism

    bp = _blueprint(blueprint)
    gpu_name, per_node, total = _gpu(bp)
    arch = _arch(model, model_file, {})
    count = gpus or total * per_node
    found = best_parallelism(arch, count, bp.gpu_spec(gpu_name), per_node, _model(bp),
                             global_batch, top=top, gpu_name=gpu_name)  # fmt: skip
    rows = [_step_dict(e, None, gpu_name) for e in found]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        raise fail(f"no split of {arch.name} fits {count} x {gpu_name} (hint: more GPUs)")
    table = Table(title=f"{arch.name} on {count} x {gpu_name}: fastest splits that fit")
    for column in ("tp", "pp", "dp", "mbs", "v", "recompute", "dist-opt", "step s", "MFU",
                   "GiB/GPU"):  # fmt: skip
        table.add_column(column, justify="right")
    for e in found:
        p = e.parallel
        table.add_row(str(p.tp), str(p.pp), str(p.dp), str(p.micro_batch), str(p.interleave),
                      p.recompute, "yes" if p.distributed_optimizer else "no",
                      f"{e.step_time_s:.3f}", f"{e.mfu:.1%}",
                      f"{e.memory.needed_bytes / GIB:.1f}")  # fmt: skip
    console = Console()
    console.print(table)
    console.print(_band_line("training", gpu_name))


perf_app.command()(validate)  # defined in cli/perf_validate.py


@perf_app.command()
def calibrate(
    output: Annotated[str, typer.Option("--output", "-o", help="calibration file to write")] = (
        "calibration.json"
    ),
    device: Annotated[str | None, typer.Option(help="cuda or cpu; default: cuda if present")] = (
        None
    ),
    quick: Annotated[bool, typer.Option(help="fewer repeats (a smoke test)")] = False,
    peak_tflops: Annotated[float | None, typer.Option(help="dense bf16 peak of the device")] = (
        None
    ),
) -> None:
    """Measure GEMMs by shape, attention by backend, memory bandwidth and launch cost with torch
    on this machine, and write a file for ``perf train --calibration``."""
    try:
        from railyard.twin.calibrate import measure
        from railyard.twin.calibration import save
    except ImportError as exc:  # torch is an optional extra
        missing = f"calibrate needs torch ({exc.name} missing)"
        raise fail(f"{missing} (hint: pip install 'railyard[torch]')") from None
    if device not in (None, "cpu", "cuda") and not (device or "").startswith("cuda:"):
        raise fail(f"--device: {device!r} is not cpu or cuda")
    try:
        cal = measure(device, quick=quick, peak_tflops=peak_tflops, progress=typer.echo)
    except ValueError as exc:
        raise fail(str(exc)) from None
    save(cal, output)
    typer.echo(f"wrote {output}: {cal.device}, best GEMM {cal.best_gemm_tflops:.3g} TFLOP/s, "
               f"{cal.hbm_gbyte_s:.0f} GB/s, launch {cal.host_us_per_kernel:.1f} us")  # fmt: skip
