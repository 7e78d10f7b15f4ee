"""Check one mixture-of-experts layer, alone, against Megatron-LM's own MoE-layer benchmark.

``kind == "kernel"`` rows with ``op=moe_layer`` time one MoELayer forward and backward on every
GPU of one node, as megatron's tests/functional_tests/test_cases/common/moe_perf does: a
(seq_len x micro-batch) block of tokens per rank, force-balanced routing, one expert-parallel
group of ``ep`` ranks, the named dispatcher, BF16 or FP8. The twin prices the same layer with
railyard.twin.moe (router, permutes, grouped GEMMs, casts, the host sync) and the dispatcher's
all-to-all on the collective model, every GPU of the node busy (the sustained GEMM rate). The
row's value is the layer's throughput, tokens per rank over forward + backward time, so that a
positive error means the twin is too fast, as for every other throughput row.
"""

from __future__ import annotations

from collections.abc import Mapping

from railyard.blueprint.catalog import GPUS
from railyard.twin.implementation import for_split
from railyard.twin.models import LlmArch, Parallelism
from railyard.twin.moe import dispatch_s, moe_work
from railyard.twin.spec import SpecError, parse_params
from railyard.twin.train import CommModel, kernels_for


def _int(fields: Mapping[str, str], key: str, default: int | None = None) -> int:
    if key not in fields:
        if default is None:
            raise SpecError(key, "missing", "op=moe_layer rows need it in params")
        return default
    try:
        return int(fields[key])
    except ValueError:
        raise SpecError(key, f"{fields[key]!r} is not a whole number") from None


def moe_layer_s(
    arch: LlmArch, par: Parallelism, gpu_name: str, tokens: float, comm: CommModel
) -> tuple[float, float]:
    """(forward, backward) seconds of one MoE layer on one rank of a one-node EP group."""
    gpu = GPUS[gpu_name]
    km = kernels_for(gpu, gpu_name, par, for_split(par))
    work = moe_work(arch, par, km, tokens)
    a2a = dispatch_s(
        arch, par, tokens, 1, par.ep,
        lambda size, nodes, gpn: comm.time_s("alltoall", size, nodes, gpn),
    )  # fmt: skip
    fwd_kernels = work.gemm_kernels + work.fwd_stream_kernels + work.host_syncs
    bwd_kernels = 2 * work.gemm_kernels + work.bwd_stream_kernels
    # dispatch and combine each way; the forward waits once for the token counts
    fwd = work.fwd_gemm_s + work.fwd_stream_s + 2.0 * a2a + fwd_kernels * km.gap_s
    fwd += work.host_syncs * km.host_s
    bwd = work.bwd_gemm_s + work.bwd_stream_s + 2.0 * a2a + bwd_kernels * km.gap_s
    return fwd, bwd


def predict_moe_layer(row: Mapping[str, str], comm: CommModel) -> tuple[float, str]:
    """(tokens per second per rank through the layer, forward + backward; how it was read)."""
    fields = parse_params(row.get("params", "") or "")
    name = row["gpu"]
    if name not in GPUS:
        raise SpecError("gpu", f"unknown GPU {name!r}", f"known: {', '.join(GPUS)}")
    ep = _int(fields, "ep")
    arch = LlmArch(
        row.get("id", "moe"), 1, _int(fields, "hidden"), 1, seq_len=_int(fields, "tokens"),
        vocab=1, mlp="swiglu", experts=_int(fields, "experts"), top_k=_int(fields, "top_k"),
        moe_ffn_hidden=_int(fields, "moe_ffn_hidden"),
        shared_experts=_int(fields, "shared_experts", 0), capacity_factor=1.0,
    )  # fmt: skip
    precision = fields.get("precision", "bf16")
    par = Parallelism(
        dp=ep, ep=ep, etp=1, global_batch=ep, implementation="megatron-te",
        precision="fp8" if precision == "fp8" else "bf16",
        fp8_recipe=fields.get("fp8_recipe", "block"),
        dispatcher=fields.get("dispatcher", "alltoall"),
    )  # fmt: skip
    fwd, bwd = moe_layer_s(arch, par, name, float(arch.seq_len), comm)
    how = f"EP{ep} {par.dispatcher} {par.precision}: forward {fwd * 1e3:.2f} ms, "
    how += f"backward {bwd * 1e3:.2f} ms"
    return arch.seq_len / (fwd + bwd), how


__all__ = ["moe_layer_s", "predict_moe_layer"]
