"""The kernels of one transformer layer, the output layer and the optimizer, for one GPU.

Each piece of a step is ``Work``: GPU seconds by category (GEMM, attention, element-wise, loss,
optimizer) and the number of kernels it launches. A piece takes the longer of its GPU time and
the host time to launch its kernels, so eager PyTorch on a small model comes out launch-bound and
a large model does not. Element-wise traffic is counted tensor by tensor for the implementation
at hand (railyard.twin.implementation): what Megatron fuses into one pass, eager PyTorch reads
and writes again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from railyard.twin.attention import KERNELS as ATTENTION_KERNELS
from railyard.twin.attention import fused_attention_s
from railyard.twin.calibration import Calibration
from railyard.twin.fp8 import cast_bytes, cast_kernels
from railyard.twin.implementation import (
    LOSS_BYTES_PER_LOGIT,
    LOSS_KERNELS,
    OPTIMIZER_BYTES,
    ZERO_GRAD_BYTES,
    Implementation,
)
from railyard.twin.kernels import KernelModel
from railyard.twin.models import LlmArch, Parallelism
from railyard.twin.moe import expert_tp, moe_work

CATEGORIES = ("gemm", "attention", "elementwise", "loss", "optimizer")
# Gradient accumulation per parameter per micro-batch: Megatron adds a bf16 gradient to its fp32
# main_grad buffer every micro-batch (read 2, read 4, write 4). Under autocast each fp32 weight
# is cast to bf16 once per forward (read 4, write 2) and the cast's backward turns the bf16
# gradient into fp32 (read 2, write 4); the first micro-batch's gradient is then stored as it is
# (AccumulateGrad takes the tensor when .grad is None, as zero_grad(set_to_none=True) leaves
# it), each later one is added (read 4 + 4, write 4).
# In pure bf16 eager PyTorch the gradient is bf16: the first micro-batch's is stored, each later
# one added (read 2 + 2, write 2).
GRAD_ACCUM_BYTES = {"fp32-buffer": 10.0, "autocast": 12.0, "bf16": 6.0}
AUTOCAST_CAST_BYTES = 6.0
AUTOCAST_GRAD_CAST_BYTES = 6.0
# torch's multi_tensor_apply launches a kernel per 36 tensors at depth 4 (params, grads,
# exp_avg, exp_avg_sq) and per 320 blocks of 65,536 elements, whichever fills first
# (aten/src/ATen/native/cuda/MultiTensorApply.cuh: depth_to_max_tensors, depth_to_max_blocks,
# kChunkSize); the foreach AdamW makes about eight such passes, the fused one a single pass.
FOREACH_TENSORS_PER_KERNEL = 36
FOREACH_ELEMENTS_PER_KERNEL = 320 * 65536
FOREACH_PASSES = 8
# Eager unfused attention under autocast, bytes per attention score beyond the two batched
# GEMMs, as ``softmax((q @ k^T) * scale masked by tril) @ v`` runs: forward scale (read 2,
# write 2), masked_fill (read 2 + a 1-byte mask, write 2), autocast's cast to fp32 for softmax
# (2 + 4), softmax in fp32 (4 + 4), the cast back to bf16 for the second GEMM (4 + 2): 29
# bytes in 5 kernels; backward the two casts again (6 + 6), softmax backward (read y and dy,
# write dx: 12), masked_fill's and the scale's backward (5 + 4): 33 bytes in 5 kernels.
EAGER_SCORE_BYTES = (29.0, 33.0)
EAGER_SCORE_KERNELS = 5
# The same in pure bf16 (no autocast casts): forward scale (2 + 2), masked_fill (2 + 1 + 2),
# softmax (2 + 2): 13 bytes in 3 kernels; backward softmax (read y and dy, write dx: 6),
# masked_fill (5) and scale (4): 15 bytes in 3 kernels.
EAGER_BF16_SCORE_BYTES = (13.0, 15.0)
EAGER_BF16_SCORE_KERNELS = 3


# torch.utils.checkpoint's own host cost per checkpointed region (one layer), forward and
# recompute together: about 350 us, plus 30-50 us (40 taken) to save and restore the RNG
# states (preserve_rng_state=True, its default), as a PyTorch maintainer measured it on an
# 8-GPU node (pytorch/torchtitan issue 1323 and PR 2380, 2026); pytorch/pytorch PR 174322
# (2026) cuts the 350 us to 80 us in later releases. Megatron's own checkpoint function is
# not this one and carries none of it here.
EAGER_CHECKPOINT_HOST_S = 350e-6 + 40e-6


@dataclass(slots=True)
class Work:
    """GPU seconds by category and kernels launched, and host seconds spent beside the
    launches (``host_extra_s``: Python work that issues no kernel)."""

    seconds: dict[str, float] = field(default_factory=dict)
    kernels: int = 0
    host_extra_s: float = 0.0

    def add(self, category: str, seconds: float, kernels: int = 1) -> None:
        self.seconds[category] = self.seconds.get(category, 0.0) + seconds
        self.kernels += kernels

    def extend(self, other: Work, times: float = 1.0) -> None:
        for k, v in other.seconds.items():
            self.seconds[k] = self.seconds.get(k, 0.0) + v * times
        self.kernels += round(other.kernels * times)
        self.host_extra_s += other.host_extra_s * times

    @property
    def gpu_s(self) -> float:
        return sum(self.seconds.values())

    def time_s(self, km: KernelModel) -> float:
        """Wall time: GPU work plus a gap per kernel, or the host's launches if slower."""
        host_s = self.kernels * km.host_s + self.host_extra_s
        return max(self.gpu_s + self.kernels * km.gap_s, host_s)

    def host_idle_s(self, km: KernelModel) -> float:
        """Time the GPU waits for the host to launch kernels."""
        return max(0.0, self.time_s(km) - self.gpu_s - self.kernels * km.gap_s)


@dataclass(frozen=True, slots=True)
class LayerWork:
    """One layer, one micro-batch: forward, backward, recompute, and the GEMM time each hides."""

    fwd: Work
    bwd: Work
    recompute: Work
    fwd_gemm_s: float
    bwd_gemm_s: float
    expert_gemm_s: float
    fwd_drains: bool = False  # a host sync in the forward drains the launch queue (MoE)


@dataclass(frozen=True, slots=True)
class Shapes:
    """Per-GPU sizes of one micro-batch."""

    tokens: float  # tokens through this GPU's GEMMs
    sp_tokens: float  # tokens of the replicated (norm, residual) ops: tokens / t with SP
    t: int


def shapes(arch: LlmArch, par: Parallelism) -> Shapes:
    tokens = par.micro_batch * arch.seq_len / par.cp
    return Shapes(tokens, tokens / par.tp if par.sequence_parallel else tokens, par.tp)


def layer_work(
    arch: LlmArch,
    par: Parallelism,
    impl: Implementation,
    backend: str,
    km: KernelModel,
    gpu_name: str,
    *,
    sustained: float,
    calibration: Calibration | None = None,
) -> LayerWork:
    """Kernels of one layer for one micro-batch on one GPU (see the module docstring)."""
    sh = shapes(arch, par)
    t, h, d, tokens = sh.t, arch.hidden, arch.head_dim, sh.tokens
    fwd, bwd = Work(), Work()
    qkv_width = (arch.heads + 2 * arch.n_kv_heads) * d / t
    q_width = arch.heads * d / t
    if arch.is_mla:
        # MLA's down- and up-projections priced as one GEMM of the same FLOPs from h
        q_width = arch.heads * arch.value_head_dim / t
        qkv_width = (arch.attention_matmul_params() / h) / t - q_width
    fwd_gemm = bwd_gemm = expert_gemm = 0.0
    for n, k in ((qkv_width, h), (h, q_width)):  # QKV, output projection
        f, b = km.gemm_fwd_bwd_s(tokens, n, k)
        fwd_gemm, bwd_gemm = fwd_gemm + f, bwd_gemm + b
    f_exp = arch.expert_ffn / (expert_tp(par) if arch.is_moe else t)
    f_in = 2 * f_exp if arch.mlp == "swiglu" else f_exp
    moe = moe_work(arch, par, km, tokens) if arch.is_moe else None
    if moe is not None:
        fwd_gemm, bwd_gemm = fwd_gemm + moe.fwd_gemm_s, bwd_gemm + moe.bwd_gemm_s
        expert_gemm = moe.expert_gemm_s
        fwd.add("elementwise", moe.fwd_stream_s, moe.fwd_stream_kernels)
        bwd.add("elementwise", moe.bwd_stream_s, moe.bwd_stream_kernels)
        # the token counts' copy to the host drains the GPU: it idles until the host has
        # issued the next kernel (one launch and one gap), once per forward
        fwd.add("elementwise", moe.host_syncs * (km.host_s + km.gap_s), moe.host_syncs)
        gemm_kernels = 2 + moe.gemm_kernels
    else:
        for n, k in ((f_in, h), (h, f_exp)):
            f, b = km.gemm_fwd_bwd_s(tokens, n, k)
            fwd_gemm, bwd_gemm = fwd_gemm + f, bwd_gemm + b
        gemm_kernels = 4
    fwd.add("gemm", fwd_gemm, gemm_kernels)
    bwd.add("gemm", bwd_gemm, 2 * gemm_kernels)

    # attention core
    heads = arch.heads / t
    if backend == "unfused":
        # QK^T and attention-over-V as batched GEMMs, softmax and dropout in between: Megatron's
        # fused scale-mask-softmax moves 4 + 5 bytes per score forward (softmax read/write;
        # dropout read/write + 1-byte mask) and 6 + 5 backward; eager PyTorch runs each step as
        # its own kernel (EAGER_SCORE_BYTES)
        batch = par.micro_batch * heads
        s_q, s_kv = arch.seq_len / par.cp, arch.attended_keys()
        qk = km.gemm_s(s_q, s_kv, d, batch)
        av = km.gemm_s(s_q, d, s_kv, batch)
        scores = batch * s_q * s_kv
        drop = 5.0 if arch.dropout else 0.0
        drop_k = 1 if arch.dropout else 0
        if impl.fused_elementwise:
            (soft_f, soft_b), soft_k = (4.0, 6.0), 1
        elif impl.autocast:
            (soft_f, soft_b), soft_k = EAGER_SCORE_BYTES, EAGER_SCORE_KERNELS
        else:
            (soft_f, soft_b), soft_k = EAGER_BF16_SCORE_BYTES, EAGER_BF16_SCORE_KERNELS
        fwd.add("attention", qk + av, 2)
        fwd.add("attention", km.stream_s(scores * (soft_f + drop)), soft_k + drop_k)
        bwd.add("attention", 2.0 * (qk + av), 4)
        bwd.add("attention", km.stream_s(scores * (soft_b + drop)), soft_k + drop_k)
        attn_fwd_s = qk + av + km.stream_s(scores * (soft_f + drop))
    else:
        measured = None
        if calibration is not None:
            measured = {
                direction: rate
                for direction in ("fwd", "bwd")
                if (rate := calibration.attention_tflops(backend, direction, True, d, arch.seq_len))
                is not None
            }
        a_fwd, a_bwd = fused_attention_s(
            backend, gpu_name, km.peak_flops_s,
            batch=par.micro_batch, heads=heads, s_q=arch.seq_len / par.cp,
            s_kv=causal_keys(arch), head_dim=arch.qk_head_dim, causal=True,
            dropout=arch.dropout, sustained=sustained,
            measured_tflops=measured or None,
        )  # fmt: skip
        fwd.add("attention", a_fwd, ATTENTION_KERNELS["fwd"])
        bwd.add("attention", a_bwd, ATTENTION_KERNELS["bwd"])
        attn_fwd_s = a_fwd

    mlp_tokens = moe.routed_tokens if moe is not None else tokens
    _elementwise(arch, impl, sh, km, fwd, bwd, q_width, qkv_width, f_in, f_exp, mlp_tokens)
    if km.operand_bytes == 1.0:
        # fp8: each GEMM input is cast with a transposed copy for the other pass, forward
        # inputs and backward output-gradients alike, at the recipe's bytes (railyard.twin.fp8);
        # a MoE layer's expert inputs are cast per expert in railyard.twin.moe
        mlp_in = 0.0 if arch.is_moe else 1.0
        fwd_in = h + q_width + mlp_in * (h + f_exp)
        bwd_in = h + qkv_width + mlp_in * (h + f_in)
        per, kernels = cast_bytes(par.fp8_recipe), cast_kernels(par.fp8_recipe)
        casts = 2 + (0 if arch.is_moe else 2)
        fwd.add("elementwise", km.stream_s(tokens * per * fwd_in), casts * kernels)
        bwd.add("elementwise", km.stream_s(tokens * per * bwd_in), casts * kernels)
    recompute = Work()
    if par.recompute == "full":
        recompute.extend(fwd)
        if impl.name == "eager":  # torch.utils.checkpoint around each layer
            recompute.host_extra_s += EAGER_CHECKPOINT_HOST_S
    elif par.recompute == "selective":
        recompute.add("attention", attn_fwd_s, 2 if backend == "unfused" else 1)
    drains = moe is not None and moe.host_syncs > 0
    return LayerWork(fwd, bwd, recompute, fwd_gemm, bwd_gemm, expert_gemm, drains)


def causal_keys(arch: LlmArch) -> float:
    """Keys of a causal kernel with the same work: a window of w keys does the work of a
    causal sequence of 2w (each query sees w keys, not s/2 on average)."""
    s = arch.seq_len
    if not arch.window or 2 * arch.window >= s:
        return float(s)
    share = 1.0 / max(1, arch.window_every)
    return share * 2 * arch.window + (1.0 - share) * s


def _elementwise(
    arch: LlmArch,
    impl: Implementation,
    sh: Shapes,
    km: KernelModel,
    fwd: Work,
    bwd: Work,
    q_width: float,
    qkv_width: float,
    f_in: float,
    f_exp: float,
    mlp_tokens: float,
) -> None:
    """Norms, residual adds, dropout, activation, rotary embedding, bias gradients, layouts."""
    h, tokens, sp = arch.hidden, sh.tokens, sh.sp_tokens
    eager = not impl.fused_elementwise

    def both(fwd_bytes: float, bwd_bytes: float, fwd_k: int, bwd_k: int) -> None:
        fwd.add("elementwise", km.stream_s(fwd_bytes), fwd_k)
        bwd.add("elementwise", km.stream_s(bwd_bytes), bwd_k)

    # two norms: one kernel reads 2h and writes 2h; backward reads x and dy and writes dx (6h).
    # Under autocast the residual stream stays fp32 (the embedding is fp32 and an add of fp32
    # and bf16 is fp32), and layer_norm runs in fp32: it reads 4h and writes 4h, and the next
    # GEMM's input is cast (read 4h, write 2h); backward casts the GEMM's bf16 input gradient
    # to fp32 (2h + 4h), computes dx (4h + 4h + 4h) and, in its own kernel, the weight and bias
    # gradients (reading x and dy again, 8h)
    if impl.autocast:
        (norm_fwd, norm_bwd), norm_k = (14.0, 26.0), (4, 6)
    else:
        (norm_fwd, norm_bwd), norm_k = (4.0, 6.0), (2, 6 if eager else 4)
    both(2 * sp * norm_fwd * h, 2 * sp * norm_bwd * h, *norm_k)
    # two residual branches: fused bias-dropout-add reads the branch and the residual and writes
    # the sum (and a 1-byte mask); unfused, dropout (read 2h, write 2h + mask) then add (read 4h,
    # write 2h). Backward: dropout backward (5h) and autograd's sum of the two gradient streams
    # at the fork (read 4h, write 2h). Under autocast the add reads the fp32 residual and the
    # bf16 branch and writes fp32 (10h); backward sums fp32 streams (12h) and casts the
    # branch's gradient to bf16 (read 4h, write 2h).
    drop = 5.0 if arch.dropout else 0.0
    drop_k = 1 if arch.dropout else 0
    if eager:
        add_f, add_b, add_bk = (10.0, 18.0, 2) if impl.autocast else (6.0, 6.0, 1)
        res_fwd, res_bwd = drop + add_f, drop + add_b
        res_k, res_bk = drop_k + 1, drop_k + add_bk
    else:
        res_fwd, res_bwd = 6.0 + (1.0 if arch.dropout else 0.0), drop + 6.0
        res_k = res_bk = 1
    both(2 * sp * res_fwd * h, 2 * sp * res_bwd * h, 2 * res_k, 2 * res_bk)
    # activation: GeLU reads and writes the ffn columns (backward reads x and dy, writes dx);
    # SwiGLU reads gate and up and writes one (backward 10 bytes per column); unfused SwiGLU
    # is silu then multiply
    if arch.mlp == "swiglu":
        act_f, act_b, act_k = (10.0, 16.0, 2) if eager else (6.0, 10.0, 1)
    else:
        act_f, act_b, act_k = 4.0, 6.0, 1
    both(mlp_tokens * act_f * f_exp, mlp_tokens * act_b * f_exp, act_k, act_k)
    if not arch.learned_positions:
        # rotary embedding on Q and K (read + write); eager rotate_half makes about three
        # passes in six kernels, a fused kernel one pass
        kv_width = (qkv_width - q_width) / 2
        rope = 4.0 * tokens * (q_width + kv_width)
        passes, k = (3.0, 6) if eager else (1.0, 1)
        both(passes * rope, passes * rope, k, k)
    if eager:
        # eager attention output is transposed back to (tokens, heads x d) with a copy; backward,
        # the separate q, k and v gradients are stacked into the fused QKV layout they came from
        # (the backward of the permute and view: read and write the QKV width)
        both(4.0 * tokens * q_width, 4.0 * tokens * q_width, 1, 1)
        bwd.add("elementwise", km.stream_s(4.0 * tokens * qkv_width), 1)
    if arch.biases and not impl.fused_bias_grad:
        # grad_bias = grad_out.sum(0) for QKV and MLP-in (column parallel: all tokens) and for
        # the projection and MLP-out (row parallel: replicated bias, sp tokens)
        col = tokens * qkv_width + mlp_tokens * f_in
        row = sp * h + mlp_tokens / tokens * sp * h
        bwd.add("elementwise", km.stream_s(2.0 * (col + row)), 4)


def weight_tensors(arch: LlmArch) -> int:
    """Weight tensors of one layer: its GEMM weights, their biases and the norms' parameters."""
    linears = 4 + (2 * arch.experts + 1 if arch.is_moe else 0)
    norms = 2 * (2 if arch.biases else 1)
    return linears * (2 if arch.biases else 1) + norms


def grad_accumulation_work(
    params: float, tensors: int, impl: Implementation, km: KernelModel
) -> Work:
    """Per micro-batch: fp32 gradient accumulation (Megatron) or autocast's weight casts and
    their gradients' casts of ``params`` held in ``tensors`` tensors (one kernel each per pass);
    autocast's later micro-batches add :func:`autocast_accumulation_work`."""
    work = Work()
    if impl.autocast:
        work.add("elementwise", km.stream_s(params * AUTOCAST_CAST_BYTES), tensors)
        work.add("elementwise", km.stream_s(params * AUTOCAST_GRAD_CAST_BYTES), tensors)
    elif not impl.grad_accum_fusion and not impl.grads_set_to_none:
        work.add("elementwise", km.stream_s(params * GRAD_ACCUM_BYTES["fp32-buffer"]), tensors)
    return work


def autocast_accumulation_work(
    params: float, tensors: int, impl: Implementation, km: KernelModel, micro_batches: int
) -> Work:
    """Per step under autocast: each micro-batch after the first adds its fp32 gradient to
    ``.grad`` (GRAD_ACCUM_BYTES["autocast"], one kernel per tensor); nothing otherwise."""
    work = Work()
    if impl.grads_set_to_none and micro_batches > 1:
        extra = micro_batches - 1
        per = GRAD_ACCUM_BYTES["autocast" if impl.autocast else "bf16"]
        work.add("elementwise", extra * km.stream_s(params * per), extra * tensors)
    return work


def logits_work(
    arch: LlmArch,
    par: Parallelism,
    impl: Implementation,
    km: KernelModel,
    head_km: KernelModel | None = None,
) -> Work:
    """Output layer forward + backward (never recomputed), final norm and the cross-entropy.
    ``head_km`` prices the output GEMMs where they run at another precision than the layers'
    (Megatron-Core's output layer stays bf16 under fp8: railyard.twin.fp8)."""
    sh = shapes(arch, par)
    vocab = arch.vocab / par.tp
    work = Work()
    f, b = (head_km or km).gemm_fwd_bwd_s(sh.tokens, vocab, arch.hidden)
    work.add("gemm", f + b, 3)
    logits = sh.tokens * vocab
    work.add("loss", km.stream_s(logits * LOSS_BYTES_PER_LOGIT[impl.loss]), LOSS_KERNELS[impl.loss])
    work.add("elementwise", km.stream_s(sh.sp_tokens * 10.0 * arch.hidden), 3)  # final norm
    return work


def embedding_work(arch: LlmArch, par: Parallelism, impl: Implementation, km: KernelModel) -> Work:
    """Input embedding gather (and learned positions) forward, and its dense gradient: the
    backward of a lookup writes a full vocabulary x hidden gradient (fp32 under autocast), then
    accumulates it like any weight."""
    sh = shapes(arch, par)
    work = Work()
    pos = 6.0 if arch.learned_positions else 0.0
    work.add("elementwise", km.stream_s(sh.tokens * (4.0 + pos) * arch.hidden), 2)
    table = arch.vocab * arch.hidden / par.tp
    grad_bytes = 4.0 if impl.autocast else 2.0
    work.add("elementwise", km.stream_s(table * grad_bytes + sh.tokens * 2.0 * arch.hidden), 2)
    return work


def optimizer_work(
    params: float, shard_params: float, tensors: int, impl: Implementation, km: KernelModel
) -> Work:
    """Once per step: zero the gradient buffer of ``params`` (Megatron's memset; eager PyTorch's
    zero_grad sets .grad to None, its default since torch 2.0), then Adam on this rank's
    shard."""
    work = Work()
    if not impl.grads_set_to_none:
        work.add("optimizer", km.stream_s(params * ZERO_GRAD_BYTES), 1)
    kernels = 2
    if impl.optimizer == "foreach":
        launches = max(
            -(-tensors // FOREACH_TENSORS_PER_KERNEL),
            -(-round(shard_params) // FOREACH_ELEMENTS_PER_KERNEL),
        )
        kernels = FOREACH_PASSES * max(1, launches)
    work.add("optimizer", km.stream_s(shard_params * OPTIMIZER_BYTES[impl.optimizer]), kernels)
    return work


__all__ = [
    "CATEGORIES",
    "EAGER_CHECKPOINT_HOST_S",
    "LayerWork",
    "Work",
    "autocast_accumulation_work",
    "embedding_work",
    "grad_accumulation_work",
    "layer_work",
    "logits_work",
    "optimizer_work",
    "weight_tensors",
]
