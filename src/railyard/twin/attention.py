"""Fused attention kernel time by backend, sequence length, head dimension and direction.

Attention does not run at the GEMM rate. Its kernels stream K and V tiles past each block of
queries and spend part of their time in softmax, so their rate grows with the sequence length
and the head dimension, and differs by implementation and by pass: on an H100, FlashAttention-2
reaches only about 35% of peak where FlashAttention-3 and cuDNN reach 55-65%, and the backward
pass (2.5x the forward FLOPs, five matmuls against two) runs slower than the forward one.

The rates below are the bar labels of Shah et al. 2024, "FlashAttention-3" (arXiv 2407.08608),
Figures 5 and 6: bf16 on an H100 80GB SXM5, batch x sequence = 16k tokens, hidden 2,048, FLOPs
counted as in the flash-attention benchmarks (forward 4 b h s^2 d, halved when causal; backward
2.5x forward). Between the measured sequence lengths and head dimensions the rate is
interpolated in log2; outside them it is held at the nearest measured point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from railyard.twin.links import gpu_arch

Backend = Literal["flash2", "flash3", "cudnn", "unfused"]
BACKENDS: tuple[str, ...] = ("flash2", "flash3", "cudnn", "unfused")
SEQS = (512, 1024, 2048, 4096, 8192, 16384)
H100_PEAK_TFLOPS = 989.5

# (backend, pass, causal, head dim) -> TFLOP/s at SEQS. FA3 paper Figure 5 (forward) and
# Figure 6 (backward; the paper measures it without the causal mask).
_H100_TFLOPS: dict[tuple[str, str, bool, int], tuple[float, ...]] = {
    ("flash2", "fwd", False, 64): (282, 306, 318, 321, 322, 324),
    ("flash2", "fwd", False, 128): (309, 350, 362, 368, 370, 370),
    ("flash2", "fwd", True, 64): (180, 229, 262, 284, 295, 299),
    ("flash2", "fwd", True, 128): (191, 260, 298, 319, 333, 335),
    ("flash2", "bwd", False, 64): (198, 238, 264, 279, 287, 291),
    ("flash2", "bwd", False, 128): (214, 260, 291, 310, 318, 322),
    ("cudnn", "fwd", False, 64): (335, 373, 395, 408, 412, 413),
    ("cudnn", "fwd", False, 128): (482, 574, 617, 609, 600, 595),
    ("cudnn", "fwd", True, 64): (225, 288, 334, 363, 379, 388),
    ("cudnn", "fwd", True, 128): (315, 410, 484, 518, 529, 539),
    ("cudnn", "bwd", False, 64): (266, 348, 395, 417, 432, 433),
    ("cudnn", "bwd", False, 128): (305, 408, 465, 499, 518, 516),
    ("flash3", "fwd", False, 64): (333, 392, 460, 476, 496, 497),
    ("flash3", "fwd", False, 128): (482, 565, 625, 638, 646, 648),
    ("flash3", "fwd", True, 64): (197, 265, 371, 420, 460, 473),
    ("flash3", "fwd", True, 128): (292, 423, 521, 579, 602, 616),
    ("flash3", "bwd", False, 64): (272, 363, 422, 453, 472, 474),
    ("flash3", "bwd", False, 128): (316, 424, 501, 542, 559, 561),
}  # fmt: skip
# (The two readings of the 512-token forward bars for cuDNN and FA3 at head dim 128, 467 and
# 497, are averaged to 482.)

# On an A100, FlashAttention-2 reaches up to 73% of peak (Dao 2023, arXiv 2307.08691, abstract)
# where the same kernels reach 370 / 989.5 = 37.4% on an H100 (table above): the H100 rates of
# FA2, as fractions of peak, are scaled by 0.73 / 0.374 on Ampere. FA3 is Hopper-only and
# Transformer Engine uses FlashAttention on Ampere, so every backend is FA2 there.
AMPERE_FA2_SCALE = 0.73 / (370.0 / H100_PEAK_TFLOPS)
# Dropout inside the fused kernel (Philox random numbers regenerated in backward): forward at
# 75-85% and backward at 60-70% of the no-dropout rate (Dao-AILab/flash-attention pull request
# 2597, dropout benchmarks); the middles are taken.
DROPOUT_FWD_RATE = 0.80
DROPOUT_BWD_RATE = 0.65
# FlashAttention-2 is compiled for head dimensions 32, 64, 96, 128, 160, 192 and 256 and runs a
# head of another size in the next one up, padded (flash-attention csrc/flash_attn/src/
# static_switch.h, HEADDIM_SWITCH): a head of 80 does the work of 96.
FA2_HEAD_DIMS = (32, 64, 96, 128, 160, 192, 256)
BWD_FLOPS_RATIO = 2.5  # five matmuls in backward against two in forward
CAUSAL_WORK = 0.5  # a causal kernel skips the masked half of the score tiles

# Kernels per call: forward one; backward a preprocess (dot(dO, O)), the main kernel and, for
# FA2, the dQ conversion (flash-attention csrc, flash_bwd_launch_template.h).
KERNELS = {"fwd": 1, "bwd": 3}


_LOG2: dict[float, float] = {float(v): math.log2(v) for v in (*SEQS, 64, 128)}


def _interp(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Piecewise-linear interpolation in log2(x), clamped to the ends."""
    lx = [_LOG2.get(float(v)) or math.log2(v) for v in xs]
    t = math.log2(max(x, 1.0))
    if t <= lx[0]:
        return float(ys[0])
    if t >= lx[-1]:
        return float(ys[-1])
    for i in range(len(lx) - 1):
        if t <= lx[i + 1]:
            w = (t - lx[i]) / (lx[i + 1] - lx[i])
            return float(ys[i]) * (1 - w) + float(ys[i + 1]) * w
    return float(ys[-1])  # pragma: no cover


def _h100_tflops(backend: str, direction: str, causal: bool, head_dim: int, seq: float) -> float:
    def at(dim: int, causal_key: bool) -> float:
        return _interp(SEQS, _H100_TFLOPS[(backend, direction, causal_key, dim)], seq)

    def by_dim(causal_key: bool) -> float:
        return _interp((64, 128), (at(64, causal_key), at(128, causal_key)), head_dim)

    if direction == "bwd" and causal:
        # backward was measured without the mask; apply the forward's causal/non-causal ratio
        ratio = _h100_tflops(backend, "fwd", True, head_dim, seq) / _h100_tflops(
            backend, "fwd", False, head_dim, seq
        )
        return by_dim(False) * ratio
    return by_dim(causal)


def resolve_backend(backend: str, gpu_name: str) -> str:
    """The backend that really runs on this GPU (FA3 and cuDNN's kernels need Hopper)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown attention backend {backend!r}; expected {', '.join(BACKENDS)}")
    if backend in ("flash3", "cudnn") and gpu_arch(gpu_name) == "ampere":
        return "flash2"
    return backend


def fraction_of_peak(
    backend: str, gpu_name: str, direction: str, *, causal: bool, head_dim: int, seq: float
) -> float:
    """Rate of a fused attention kernel as a fraction of the GPU's dense bf16 peak."""
    real = resolve_backend(backend, gpu_name)
    if real == "unfused":
        raise ValueError("unfused attention is priced as GEMMs and softmax traffic")
    fraction = _h100_tflops(real, direction, causal, head_dim, seq) / H100_PEAK_TFLOPS
    if gpu_arch(gpu_name) == "ampere":
        fraction *= AMPERE_FA2_SCALE
    return fraction


def attention_flops(
    batch: float, heads: float, s_q: float, s_kv: float, head_dim: float, *, causal: bool
) -> float:
    """Forward FLOPs the kernel executes: QK^T and PV, 2 each per multiply-add."""
    return 4.0 * batch * heads * s_q * s_kv * head_dim * (CAUSAL_WORK if causal else 1.0)


def fused_attention_s(
    backend: str,
    gpu_name: str,
    peak_flops_s: float,
    *,
    batch: float,
    heads: float,
    s_q: float,
    s_kv: float,
    head_dim: int,
    causal: bool = True,
    dropout: bool = False,
    sustained: float = 1.0,
    measured_tflops: dict[str, float] | None = None,
) -> tuple[float, float]:
    """(forward, backward) seconds of one fused attention call (FlashAttention-2 pads the head
    to the size it was compiled for, FA2_HEAD_DIMS).

    ``measured_tflops`` ({"fwd": .., "bwd": ..}, from a calibration file) replaces the
    published rates for the local GPU.
    """
    run_dim = head_dim
    if resolve_backend(backend, gpu_name) == "flash2":
        run_dim = next((d for d in FA2_HEAD_DIMS if d >= head_dim), head_dim)
    flops = attention_flops(batch, heads, s_q, s_kv, run_dim, causal=causal)
    out = []
    for direction, ratio, drop in (
        ("fwd", 1.0, DROPOUT_FWD_RATE),
        ("bwd", BWD_FLOPS_RATIO, DROPOUT_BWD_RATE),
    ):
        if measured_tflops and direction in measured_tflops:
            rate = measured_tflops[direction] * 1e12
        else:
            rate = (
                peak_flops_s
                * sustained
                * fraction_of_peak(
                    backend, gpu_name, direction, causal=causal, head_dim=run_dim, seq=s_kv
                )
            )
        if dropout:
            rate *= drop
        out.append(flops * ratio / rate)
    return out[0], out[1]


__all__ = [
    "BACKENDS",
    "BWD_FLOPS_RATIO",
    "KERNELS",
    "Backend",
    "attention_flops",
    "fraction_of_peak",
    "fused_attention_s",
    "resolve_backend",
]
