"""Check the training, memory, checkpoint and failure models against published figures.

Each row of the reference table (perf_reference.csv: id, kind, setup, gpus, nodes, gpu, ...,
value, unit, note) is predicted from its ``setup`` text and compared with its ``value``. Where a
row leaves a setting out, the value used comes from the run's public launch script or is a
stated assumption written in the row itself, never a number chosen to match the row.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from railyard.blueprint.catalog import GPUS
from railyard.blueprint.models import StorageSystem
from railyard.twin import checkpoint as ckpt
from railyard.twin.memory import OPTIMIZER_BYTES, estimate_memory, model_state_bytes
from railyard.twin.models import PRESETS, LlmArch, Parallelism
from railyard.twin.spec import (
    ARCH_FIELDS,
    SPLIT_FIELDS,
    SpecError,
    arch_from_fields,
    parse_params,
    split_fields,
    split_from_fields,
)
from railyard.twin.train import CommModel, StepEstimate, estimate_step

GIB = 2.0**30
TARGETS = {
    "collective": 0.10,
    "training": 0.10,
    "memory": 0.05,
    "checkpoint": 0.15,
    "failure": 0.0,
    "kernel": 0.10,
}

# Micro-batch size, interleaving depth and DDP kind of each Table 1 model, keyed by (layers,
# hidden): NVIDIA/Megatron-LM examples/academic_paper_scripts/sc21/run_table_1.sh. All use
# "--activations-checkpoint-method uniform" (full recompute); DDP=torch overlaps the gradient
# all-reduce with backward, DDP=local reduces after it. v is layers per stage over the
# script's --num-layers-per-virtual-pipeline-stage. Used for rows that carry no params.
SC21_TABLE_1: dict[tuple[int, int], tuple[int, int, bool]] = {
    (24, 2304): (16, 1, True),
    (30, 3072): (16, 1, True),
    (36, 4096): (16, 1, True),
    (40, 6144): (8, 1, True),
    (48, 8192): (4, 1, False),
    (60, 10240): (2, 3, False),  # 60 layers / PP4 = 15 per stage, 5 per virtual stage
    (80, 12288): (2, 2, False),  # 80 / PP8 = 10, 5 per virtual stage
    (96, 16384): (1, 2, False),  # 96 / PP16 = 6, 3 per virtual stage
    (105, 20480): (1, 3, False),  # 105 / PP35 = 3, 1 per virtual stage
    (128, 25600): (1, 1, False),
}

# BLOOM-176B: 70 layers, hidden 14336, 112 heads, vocabulary 250,880, ALiBi positions
# (BigScience, arXiv 2211.05100, Table 3).
BLOOM_176B = LlmArch(
    "bloom-176b", 70, 14336, 112, seq_len=2048, vocab=250880, learned_positions=False
)
# BLOOM's store on Jean Zay: the row's note gives about 60 GB/s aggregate; 4 x 100 Gb/s
# Omni-Path per node bounds one client at 50 GB/s.
JEAN_ZAY_STORE = StorageSystem(
    capacity_tbyte=1000, read_gbyte_s=60, write_gbyte_s=60, per_client_gbyte_s=50
)


@dataclass(frozen=True, slots=True)
class ValidationResult:
    row_id: str
    kind: str
    quantity: str
    published: float
    predicted: float
    unit: str
    note: str = ""

    @property
    def error(self) -> float:
        """Relative error of the prediction, (predicted - published) / published."""
        return (self.predicted - self.published) / self.published

    @property
    def target(self) -> float:
        """Allowed relative error for this kind of figure (the issue's targets)."""
        return TARGETS.get(self.kind, 0.0)

    @property
    def within_target(self) -> bool:
        return abs(self.error) <= self.target + 1e-9


def _num(pattern: str, text: str, default: int | None = None) -> int:
    found = re.search(pattern, text)
    if found:
        return int(found.group(1))
    if default is None:
        raise ValueError(f"no {pattern!r} in {text!r}")
    return default


def _match(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    if not found:
        raise ValueError(f"no {pattern!r} in {text!r}")
    return found.group(1)


def training_setup(row: Mapping[str, str]) -> tuple[LlmArch, Parallelism, str]:
    """The model and split a training row describes: its ``params`` fields (railyard.twin.spec),
    or for a row without them the SC'21 Table 1 text ("GPT 1.7B (24 layers h=2304 a=24) TP1 PP1
    GBS 512") with run_table_1.sh's settings. SpecError/ValueError name what is missing."""
    gpus = int(row["gpus"])
    fields = parse_params(row.get("params", "") or "")
    arch_f, split_f, rest = split_fields(fields)
    for key in rest:
        if key != "flops":
            close = difflib.get_close_matches(key, [*SPLIT_FIELDS, *ARCH_FIELDS, "flops"], n=1)
            hint = f"did you mean {close[0]}?" if close else "see railyard.twin.spec"
            raise SpecError(key, "unknown field", hint)
    if arch_f or split_f:
        arch = arch_from_fields(arch_f, default_name=row["id"])
        par = split_from_fields(split_f)
        if "dp" not in split_f:
            per_replica = par.tp * par.pp * par.cp
            if gpus % per_replica:
                raise SpecError(
                    "gpus",
                    f"{gpus} GPUs are not a multiple of tp x pp x cp = {per_replica}",
                    "give dp= or fix the split",
                )
            par = dataclasses.replace(par, dp=gpus // per_replica)
        if "sp" not in split_f:
            par = dataclasses.replace(par, sequence_parallel=par.tp > 1)
        how = ", ".join(f"{k}={v}" for k, v in split_f.items())
        return arch, par, how
    setup = row["setup"]
    layers = _num(r"(\d+) layers", setup)
    hidden = _num(r"h=(\d+)", setup)
    arch = LlmArch(
        f"gpt-{layers}x{hidden}",
        layers,
        hidden,
        _num(r"a=(\d+)", setup),
        seq_len=_num(r"s=(\d+)", setup, 2048),  # all Table 1 models: s 2048, V 51200
        vocab=_num(r"V=(\d+)", setup, 51200),
    )
    tp, pp = _num(r"TP(\d+)", setup), _num(r"PP(\d+)", setup)
    mb, v, overlap = SC21_TABLE_1[(layers, hidden)]
    par = Parallelism(
        tp=tp,
        pp=pp,
        dp=gpus // (tp * pp),
        micro_batch=mb,
        global_batch=_num(r"GBS (\d+)", setup),
        interleave=v,
        recompute="full",
        implementation="megatron",
        overlap_dp_comm=overlap,
    )
    return arch, par, f"MBS{mb} v{v} DDP={'torch' if overlap else 'local'} (run_table_1.sh)"


def _metric(row: Mapping[str, str]) -> str:
    """What the row's value measures: hardware or model TFLOP/s per GPU, or tokens/s per GPU."""
    if "token" in row["unit"].lower() or "token" in row["quantity"].lower():
        return "tokens"
    return parse_params(row.get("params", "") or "").get("flops", "hardware")


def predict_training(row: Mapping[str, str], comm: CommModel) -> tuple[float, StepEstimate, str]:
    """(predicted value in the row's unit, the estimate, how the row was read)."""
    arch, par, how = training_setup(row)
    gpu = GPUS[row["gpu"]]
    per_node = int(row["gpus"]) // max(1, int(row["nodes"]))
    est = estimate_step(arch, par, gpu, per_node, comm, gpu_name=row["gpu"])
    metric = _metric(row)
    if metric == "tokens":
        value = est.tokens_per_s / est.gpus
    elif metric == "model":
        value = est.model_tflops_per_gpu
    else:
        value = est.hardware_tflops_per_gpu
    return value, est, how


def _training(row: Mapping[str, str], comm: CommModel) -> ValidationResult:
    value, est, how = predict_training(row, comm)
    fits = "" if est.fits else "; does not fit in memory"
    return ValidationResult(
        row["id"], "training", row["quantity"], float(row["value"]), value, row["unit"],
        f"{how}{fits}",
    )  # fmt: skip


def _fits(row: Mapping[str, str]) -> ValidationResult:
    """A memory row that asks whether a published split fits (value 1) on its GPU."""
    arch, par, _ = training_setup(row)
    mem = estimate_memory(arch, par, GPUS[row["gpu"]], gpu_name=row["gpu"])
    return ValidationResult(
        row["id"], "memory", row["quantity"], float(row["value"]), 1.0 if mem.fits else 0.0,
        row["unit"], mem.reason,
    )  # fmt: skip


def _memory(row: Mapping[str, str]) -> list[ValidationResult]:
    rid, note = row["id"], row.get("note", "")
    if row.get("unit") == "fits":
        return [_fits(row)]
    gpu = GPUS["A100-SXM-80GB"]
    if rid == "m03":
        values = [float(x) for x in row["value"].split("/")]
        return [
            ValidationResult(
                f"m03.stage{stage}",
                "memory",
                "ZeRO model states per GPU",
                value,
                model_state_bytes(7.5e9, 64, stage).total_bytes / 1e9,
                "GB",
                "7.5B params, N_d 64, 2+2+12 bytes",
            )
            for stage, value in enumerate(values)
        ]
    if rid == "m04":
        return [
            ValidationResult(
                rid, "memory", row["quantity"], float(row["value"]), 10e9 * OPTIMIZER_BYTES / 1e9,
                "GB", "12 bytes per parameter",
            )
        ]  # fmt: skip
    if rid == "m01":
        arch, par = PRESETS["gpt-22b"], Parallelism(tp=8, micro_batch=4, global_batch=4)
    else:  # m02: 175B, TP8 PP8, interleaved with 12 layers per stage in 3 chunks
        arch = PRESETS["gpt3-175b"]
        par = Parallelism(tp=8, pp=8, micro_batch=1, global_batch=64, interleave=3)
    par = dataclasses.replace(par, flash_attention=False)
    plain = estimate_memory(arch, par, gpu)
    sel = dataclasses.replace(par, recompute="selective", sequence_parallel=True)
    selective = estimate_memory(arch, sel, gpu)
    # Like with like: the published figure counts a stage's transformer layers, so a
    # pipelined run is judged on a middle stage (the first one adds the embedding tables,
    # +1.7 GiB on m02, which `perf train`'s per-stage table shows as "with tables").
    middle = len(plain.stages) > 2
    how = "18 bytes/param (bf16 + fp32 grad + Adam), " + (
        "a middle pipeline stage, no embedding tables" if middle else "the only stage"
    )
    out = [
        ValidationResult(
            rid, "memory", row["quantity"], float(row["value"]),
            plain.middle_states.total_bytes / GIB, "GiB", how,
        )
    ]  # fmt: skip
    acts = re.search(r"activations ([\d.]+) GiB without.*?([\d.]+) GiB with", note)
    if acts:
        for suffix, published, est in (
            (".act", float(acts.group(1)), plain),
            (".act-sp-sel", float(acts.group(2)), selective),
        ):
            out.append(
                ValidationResult(
                    rid + suffix, "memory", "activations per GPU", published,
                    est.activations_bytes / GIB, "GiB", "Korthikanti eq. (busiest stage)",
                )
            )  # fmt: skip
    return out


def _checkpoint(row: Mapping[str, str]) -> list[ValidationResult]:
    size = ckpt.checkpoint_bytes(BLOOM_176B.params())
    published_size = float(_match(r"size=([\d.]+)", row["params"]))
    nodes = int(row["nodes"])
    return [
        ValidationResult(
            row["id"], "checkpoint", row["quantity"], float(row["value"]),
            ckpt.write_time_s(size, JEAN_ZAY_STORE, nodes), row["unit"],
            "14 B/param at min(60 GB/s aggregate, 48 x 50 GB/s); the 60 GB/s in the row's note "
            "is itself size/time, so this checks the size more than the storage model",
        ),
        ValidationResult(
            row["id"] + ".size", "checkpoint", "checkpoint size", published_size,
            size / 2.0**40, "TiB", "176.2B params x 14 bytes; the row's 'TB' read as TiB",
        ),
    ]  # fmt: skip


def _failure(row: Mapping[str, str]) -> ValidationResult:
    days = float(_match(r"days=([\d.]+)", row["params"]))
    count = ckpt.job_failure_rate_per_s(int(row["gpus"])) * days * 86400
    return ValidationResult(
        row["id"], "failure", row["quantity"], float(row["value"]), count, row["unit"],
        "consistency only: the per-GPU-hour rate is derived from this row",
    )  # fmt: skip


def validate_training(
    rows: Iterable[Mapping[str, str]],
    comm_factory: Callable[[Mapping[str, str]], CommModel] | None = None,
) -> list[ValidationResult]:
    """Predicted vs published for the training, memory, checkpoint and failure rows.

    ``comm_factory(row)`` builds the network model for a training row's cluster (its ``gpu``,
    ``nodes`` and ``fabric`` columns); without one, training rows are skipped.
    """
    out: list[ValidationResult] = []
    for row in rows:
        kind = row["kind"]
        if kind == "training" and comm_factory is not None:
            out.append(_training(row, comm_factory(row)))
        elif kind == "memory":
            out.extend(_memory(row))
        elif kind == "checkpoint":
            out.extend(_checkpoint(row))
        elif kind == "failure":
            out.append(_failure(row))
    return out
