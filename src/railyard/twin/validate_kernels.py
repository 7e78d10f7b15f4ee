"""Check the kernel model against published single-GPU microbenchmarks.

``kind == "kernel"`` rows carry ``op=gemm`` (m, n, k, precision), ``op=attention`` (backend,
causal, head_dim, batch, seq_len, heads: forward + backward rate as flash-attention's benchmark
reports it) or ``op=copy`` (HBM streaming). They run on one GPU, so the burst rates apply
(no all-GPUs-busy derate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from railyard.blueprint.catalog import GPUS
from railyard.twin.attention import BWD_FLOPS_RATIO, attention_flops, fused_attention_s
from railyard.twin.kernels import kernel_model
from railyard.twin.spec import SpecError, parse_params
from railyard.twin.validate_train import ValidationResult


def _int(fields: Mapping[str, str], key: str) -> int:
    try:
        return int(fields[key])
    except KeyError:
        raise SpecError(key, "missing", "kernel rows need it in params") from None
    except ValueError:
        raise SpecError(key, f"{fields[key]!r} is not a whole number") from None


def predict_kernel(row: Mapping[str, str]) -> tuple[float, str]:
    """(predicted value in the row's unit, how it was computed)."""
    fields = parse_params(row.get("params", "") or "")
    name = row["gpu"]
    if name not in GPUS:
        raise SpecError("gpu", f"unknown GPU {name!r}", f"known: {', '.join(GPUS)}")
    gpu = GPUS[name]
    op = fields.get("op", "")
    fp8 = fields.get("precision", "bf16") == "fp8"
    km = kernel_model(name, gpu.bf16_dense_tflops, gpu.mem_bw_tbyte_s, node_busy=False, fp8=fp8)
    if op == "gemm":
        m, n, k = _int(fields, "m"), _int(fields, "n"), _int(fields, "k")
        seconds = km.gemm_s(m, n, k)
        return 2.0 * m * n * k / seconds / 1e12, f"tiles and waves on {km.sms} SMs"
    if op == "attention":
        batch, heads = _int(fields, "batch"), _int(fields, "heads")
        seq, dim = _int(fields, "seq_len"), _int(fields, "head_dim")
        causal = fields.get("causal", "1") in ("1", "true", "yes")
        backend = fields.get("backend", "flash2")
        fwd, bwd = fused_attention_s(
            backend, name, km.peak_flops_s,
            batch=batch, heads=heads, s_q=seq, s_kv=seq, head_dim=dim, causal=causal,
        )  # fmt: skip
        flops = attention_flops(batch, heads, seq, seq, dim, causal=causal)
        rate = flops * (1.0 + BWD_FLOPS_RATIO) / (fwd + bwd) / 1e12
        return rate, f"{backend} published rates, forward + backward"
    if op == "copy":
        return km.bytes_s / 1e12, "datasheet bandwidth x HBM_FRACTION"
    raise SpecError("op", f"{op!r} is not gemm, attention or copy", "kernel rows need op=")


def validate_kernels(rows: Iterable[Mapping[str, str]]) -> list[ValidationResult]:
    out = []
    for row in rows:
        if row.get("kind") != "kernel":
            continue
        value, how = predict_kernel(row)
        out.append(
            ValidationResult(
                row["id"], "kernel", row["quantity"], float(row["value"]), value, row["unit"], how
            )
        )
    return out


__all__ = ["predict_kernel", "validate_kernels"]
