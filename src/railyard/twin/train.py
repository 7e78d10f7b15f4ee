"""Step time, MFU and throughput of one training split, from kernel shapes and a network model.

Compute efficiency is not a fitted constant. Each kernel of a layer is timed with a roofline:
a GEMM runs at the sustained matmul rate measured on real GPUs or at HBM speed for its bytes,
whichever is slower, plus a fixed launch/tail cost; element-wise kernels (norms, activations,
dropout, softmax) move their bytes at HBM speed. Large GEMMs therefore approach the ceiling and
small models lose to memory-bound kernels and launch costs. Communication comes from an injected
:class:`CommModel`, so this module holds no network model of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from railyard.blueprint.catalog import GpuSpec
from railyard.twin.memory import MemoryEstimate, estimate_memory
from railyard.twin.models import LlmArch, Parallelism

__all__ = ["CommModel", "Parallelism", "StepEstimate", "estimate_step", "pipeline_bubble"]

# Sustained fraction of the datasheet bf16 peak a large GEMM holds in training. Two public
# measurements (S. Bekman, ml-engineering): the best burst matmul rate ("MAMF") of NVIDIA parts is
# 72.9-86.9% of peak, median 80.3% (A100 SXM 86.9, H100 SXM 80.3, B200 77.6; compute/accelerator/
# README.md, MAMF table); under steady full-power load the sustained rate ("MSMF") is 0.849 (H200)
# and 0.840 (B200) of that burst (compute/accelerator/benchmarks/README.md, "alone vs all-8
# concurrent"), because boost clocks are not held at TDP. 0.803 x 0.845 = 0.68, for every GPU.
MAMF_FRACTION = 0.803
SUSTAINED_RATIO = 0.845
GEMM_PEAK_FRACTION = MAMF_FRACTION * SUSTAINED_RATIO
# Memory-bound kernels stream at about 90% of datasheet HBM bandwidth (STREAM/BabelStream-style
# copy and triad results on A100/H100; an approximation, the same for every GPU).
HBM_FRACTION = 0.90
# Fixed cost per kernel: launch plus the ramp/tail of a partly filled last wave; "a few
# microseconds" per launch (NVIDIA CUDA C++ Best Practices Guide; PyTorch CUDA Graphs blog).
KERNEL_OVERHEAD_S = 5e-6
# FlashAttention-2 reaches 50-73% of peak on A100 (Dao 2023, arXiv 2307.08691, abstract); we take
# the low end because backward, two thirds of the work, is its slower pass. Causal masking
# halves the work it does (it skips masked tiles) while the counted FLOPs stay full-square.
# Those are burst figures: derated by the same SUSTAINED_RATIO as GEMMs.
FLASH_FRACTION = 0.50 * SUSTAINED_RATIO
CAUSAL_WORK = 0.5
# fp8 tensor cores run at twice the bf16 dense rate on Hopper and Blackwell (H100 datasheet:
# 1,979 vs 989 TFLOPS dense), but the best measured fp8 matmul is a smaller fraction of that
# peak: NVIDIA H100 70.9%, GB200 72.3%, H200 73.4%, B300 74.5%, B200 76.3%, GH200 77.6%, median
# 73.9% (Bekman, MAMF table, FP8) against 80.3% for bf16. fp8 GEMMs therefore run at
# 2 x 0.739 / 0.803 of the bf16 GEMM rate. fp8 on a GPU without it (A100) is the caller's error.
FP8_SPEEDUP = 2.0 * 0.739 / MAMF_FRACTION
# Adam step traffic per parameter it updates: read fp32 grad, master, m, v (16), write master,
# m, v (12) and the bf16 copy (2) = 30 bytes (Megatron's fused Adam, memory bound).
OPTIMIZER_TRAFFIC_BYTES = 30.0
# Megatron all-reduces fp32 main grads for bf16 training (its default
# accumulate_allreduce_grads_in_fp32); bf16 parameters are gathered after a sharded step.
GRAD_REDUCE_BYTES = 4.0
PARAM_GATHER_BYTES = 2.0


class CommModel(Protocol):
    """Time of one collective over ``nodes x gpus_per_node`` GPUs (the twin's network model)."""

    def time_s(
        self,
        op: str,
        size_bytes: float,
        nodes: int,
        gpus_per_node: int,
        *,
        placement: str = "best",
        algo: str | None = None,
    ) -> float: ...


@dataclass(frozen=True, slots=True)
class StepEstimate:
    """One training step of one split: where the time goes and what it achieves."""

    model: str
    parallel: Parallelism
    gpus: int
    step_time_s: float
    compute_s: float  # kernels on the slowest stage, all micro-batches, no waiting
    bubble_s: float
    tp_comm_s: float  # exposed
    pp_comm_s: float  # exposed
    dp_comm_s: float  # exposed
    optimizer_s: float
    model_flops: float  # per step, all GPUs, no recompute (MFU numerator, PaLM definition)
    hardware_flops: float  # per step, recompute included (Narayanan et al. Table 1)
    tokens_per_step: int
    peak_tflops: float
    memory: MemoryEstimate

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def bubble_fraction(self) -> float:
        return pipeline_bubble(
            self.parallel.pp, self.parallel.micro_batches, self.parallel.interleave
        )

    @property
    def model_tflops_per_gpu(self) -> float:
        return self.model_flops / self.step_time_s / self.gpus / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> float:
        return self.hardware_flops / self.step_time_s / self.gpus / 1e12

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation against the bf16 dense peak (PaLM, Chowdhery et al. 2022)."""
        return self.model_tflops_per_gpu / self.peak_tflops

    @property
    def hfu(self) -> float:
        return self.hardware_tflops_per_gpu / self.peak_tflops

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    def time_to_train_s(self, tokens: float) -> float:
        return tokens / self.tokens_per_s


def pipeline_bubble(pp: int, micro_batches: int, interleave: int = 1) -> float:
    """Bubble time over ideal time, (p - 1) / (m v) (Narayanan et al. sections 2.2.1-2.2.2)."""
    return (pp - 1) / (micro_batches * interleave)


@dataclass(frozen=True, slots=True)
class _Gpu:
    """The rates the roofline needs, already derated."""

    flops_s: float
    attn_flops_s: float  # fused attention kernels (bf16 even in fp8 runs)
    bytes_s: float
    operand_bytes: float  # bytes per GEMM input element (2 bf16, 1 fp8)

    def gemm_s(self, m: float, n: float, k: float, batch: float = 1.0) -> float:
        """One (batched) GEMM C[m,n] = A[m,k] B[k,n]: compute or memory bound, plus launch."""
        flops = 2.0 * m * n * k * batch
        traffic = batch * (self.operand_bytes * (m * k + k * n) + 2.0 * m * n)
        return max(flops / self.flops_s, traffic / self.bytes_s) + KERNEL_OVERHEAD_S

    def gemm_fwd_bwd_s(self, m: float, n: float, k: float) -> tuple[float, float]:
        """Forward GEMM, and backward's data-gradient and weight-gradient GEMMs."""
        return self.gemm_s(m, n, k), self.gemm_s(m, k, n) + self.gemm_s(k, n, m)

    def stream_s(self, nbytes: float, kernels: int = 1) -> float:
        return nbytes / self.bytes_s + kernels * KERNEL_OVERHEAD_S


@dataclass(frozen=True, slots=True)
class _LayerTimes:
    fwd_s: float
    bwd_s: float
    recompute_s: float
    fwd_gemm_s: float
    bwd_gemm_s: float


def _layer_times(arch: LlmArch, par: Parallelism, gpu: _Gpu) -> _LayerTimes:
    """Kernel times of one layer for one micro-batch on one GPU (see module docstring)."""
    t, h, d = par.tp, arch.hidden, arch.head_dim
    s_q = arch.seq_len / par.cp
    tokens = par.micro_batch * s_q
    sp_tokens = tokens / t if par.sequence_parallel else tokens
    fwd_gemm = bwd_gemm = 0.0
    for n, k in (
        ((arch.heads + 2 * arch.n_kv_heads) * d / t, h),  # QKV
        (h, arch.heads * d / t),  # output projection
        (arch.ffn_in_width / t, h),  # MLP in (gate + up for SwiGLU)
        (h, arch.ffn / t),  # MLP out
    ):
        f, b = gpu.gemm_fwd_bwd_s(tokens, n, k)
        fwd_gemm += f
        bwd_gemm += b
    heads = arch.heads / t
    if par.flash_attention:
        flops = 4.0 * par.micro_batch * s_q * arch.seq_len * heads * d * CAUSAL_WORK
        attn_fwd = flops / gpu.attn_flops_s + KERNEL_OVERHEAD_S
        attn_bwd = 2.0 * attn_fwd
    else:
        # Unfused: QK^T and attention-over-V as batched GEMMs, softmax and dropout in between
        # (Megatron's fused scale-mask-softmax): forward moves 4 + 5 bytes per score (softmax
        # read/write; dropout read/write + 1-byte mask), backward 6 + 5.
        batch = par.micro_batch * heads
        qk = gpu.gemm_s(s_q, arch.seq_len, d, batch)
        av = gpu.gemm_s(s_q, d, arch.seq_len, batch)
        scores = batch * s_q * arch.seq_len
        drop_fwd, drop_bwd = (5.0, 5.0) if arch.dropout else (0.0, 0.0)
        attn_fwd = qk + av + gpu.stream_s(scores * (4.0 + drop_fwd), 2)
        attn_bwd = 2.0 * (qk + av) + gpu.stream_s(scores * (6.0 + drop_bwd), 2)
    # Element-wise forward bytes per token: two norms (read + write 2h each = 8h), two residual
    # adds (read 2 x 2h, write 2h; with dropout also a 1-byte mask), and the activation (GeLU:
    # read + write 2 bytes per ffn column; SwiGLU: read gate and up, write one). Norms and
    # residuals run on tokens/t with sequence parallelism (Korthikanti et al. section 4.2.2).
    # Backward reads the saved input and the incoming gradient and writes one: about 2x.
    replicated = 8.0 * h + 2.0 * (7.0 if arch.dropout else 6.0) * h
    act = (2.0 * arch.ffn_in_width + 2.0 * arch.ffn) / t
    elem_fwd = gpu.stream_s(sp_tokens * replicated + tokens * act, 5)
    elem_bwd = 2.0 * elem_fwd
    if gpu.operand_bytes == 1.0:
        # fp8: each GEMM input is cast (read 2, write 1) and given a transposed fp8 copy for the
        # other pass (write 1) before use, forward inputs and backward output-gradients alike
        # (Transformer Engine FP8 primer: per-tensor scaling with cast and cast-transpose).
        fwd_in = 2.0 * h + (arch.heads * d + arch.ffn) / t
        bwd_in = 2.0 * h + ((arch.heads + 2 * arch.n_kv_heads) * d + arch.ffn_in_width) / t
        elem_fwd += gpu.stream_s(tokens * 4.0 * fwd_in, 4)
        elem_bwd += gpu.stream_s(tokens * 4.0 * bwd_in, 4)
    fwd = fwd_gemm + attn_fwd + elem_fwd
    bwd = bwd_gemm + attn_bwd + elem_bwd
    recompute = {"none": 0.0, "selective": attn_fwd, "full": fwd}[par.recompute]
    return _LayerTimes(fwd, bwd, recompute, fwd_gemm, bwd_gemm)


def _logits_s(arch: LlmArch, par: Parallelism, gpu: _Gpu) -> float:
    """Output layer forward + backward (never recomputed) and the fp32 cross-entropy."""
    tokens = par.micro_batch * arch.seq_len / par.cp
    vocab = arch.vocab / par.tp
    f, b = gpu.gemm_fwd_bwd_s(tokens, vocab, arch.hidden)
    # logits read (2) and fp32 softmax written (4) forward, read (4) and grad written (2) back
    return f + b + gpu.stream_s(tokens * vocab * 12.0, 3)


def _group(size: int, stride: int, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, GPUs per node) of a group of ``size`` ranks spaced ``stride`` apart."""
    if stride >= gpus_per_node:
        return size, 1
    per_node = min(size, max(1, gpus_per_node // stride))
    return math.ceil(size / per_node), per_node


def estimate_step(
    arch: LlmArch,
    par: Parallelism,
    gpu: GpuSpec,
    gpus_per_node: int,
    comm: CommModel,
) -> StepEstimate:
    """Estimate one step of ``arch`` trained with split ``par``.

    1. kernel times of a layer, the output layer, and the slowest pipeline stage;
    2. exposed tensor-parallel collectives per layer (all-reduce, or reduce-scatter + all-gather
       with sequence parallelism): 2 forward, 2 backward, 2 more with full recompute
       (Narayanan et al. section 3.1), hidden under the layer's GEMMs when overlapped;
    3. pipeline: point-to-point activations per micro-batch boundary and chunk, bubble
       (p - 1)/(m v) of a micro-batch's stage time;
    4. data-parallel gradient reduction after the last micro-batch; when overlapped it hides
       under that micro-batch's backward on this stage (Megatron-Core's --overlap-grad-reduce,
       torch DDP buckets) and the parameter all-gather under the next forward;
    5. the optimizer step at HBM speed, and the memory check.
    """
    par.check(arch)
    peak = gpu.bf16_dense_tflops * 1e12
    fp8 = par.precision == "fp8"
    rates = _Gpu(
        flops_s=peak * GEMM_PEAK_FRACTION * (FP8_SPEEDUP if fp8 else 1.0),
        attn_flops_s=peak * FLASH_FRACTION,
        bytes_s=gpu.mem_bw_tbyte_s * 1e12 * HBM_FRACTION,
        operand_bytes=1.0 if fp8 else 2.0,
    )
    m, p, v, t = par.micro_batches, par.pp, par.interleave, par.tp
    layer = _layer_times(arch, par, rates)
    layers_per_stage = math.ceil(arch.layers / p)
    stage_compute = layers_per_stage * (layer.fwd_s + layer.bwd_s + layer.recompute_s)
    stage_compute += _logits_s(arch, par, rates)  # the last stage is the slowest

    # 2. tensor parallelism inside the node when it fits there
    tokens = par.micro_batch * arch.seq_len / par.cp
    act_bytes = tokens * arch.hidden * 2.0
    tp_exposed = 0.0
    if t > 1:
        tp_nodes, tp_gpn = _group(t, 1, gpus_per_node)
        if par.sequence_parallel:
            one = comm.time_s("reduce_scatter", act_bytes, tp_nodes, tp_gpn) + comm.time_s(
                "all_gather", act_bytes, tp_nodes, tp_gpn
            )
        else:
            one = comm.time_s("all_reduce", act_bytes, tp_nodes, tp_gpn)
        passes = [(2.0, layer.fwd_gemm_s), (2.0, layer.bwd_gemm_s)]
        if par.recompute == "full":
            passes.append((2.0, layer.fwd_gemm_s))
        for count, gemm_s in passes:
            exposed = count * one
            if par.overlap_tp_comm:
                exposed = max(0.0, exposed - gemm_s)
            tp_exposed += exposed
        tp_exposed *= layers_per_stage
    # context parallelism: K and V gathered forward, their grads reduce-scattered backward,
    # hidden under attention when it is longer (ring attention)
    if par.cp > 1:
        kv_bytes = 2.0 * tokens * arch.n_kv_heads * arch.head_dim * 2.0 / t
        cp_nodes, cp_gpn = _group(par.cp, t, gpus_per_node)
        cp_s = comm.time_s("all_gather", kv_bytes * par.cp, cp_nodes, cp_gpn)
        cp_s += comm.time_s("reduce_scatter", kv_bytes * par.cp, cp_nodes, cp_gpn)
        tp_exposed += layers_per_stage * max(0.0, cp_s - 0.5 * (layer.fwd_s + layer.bwd_s))

    # 3. pipeline point-to-point: activations split over TP ranks (Narayanan et al. 4.1)
    pp_exposed = 0.0
    if p > 1:
        crosses = t * par.cp * par.dp >= gpus_per_node
        nodes, gpn = (2, 1) if crosses else (1, 2)
        hop = comm.time_s("broadcast", act_bytes / t, nodes, gpn)
        pp_exposed = 0.0 if par.overlap_pp_comm else 2.0 * v * hop
    per_micro = stage_compute + tp_exposed + pp_exposed
    bubble_s = (p - 1) / v * per_micro

    # 4. data parallelism over ranks spaced tp*cp apart (Megatron's rank order)
    # the busiest stage: its layers plus one vocabulary table (first or last stage; both
    # tables, input and untied output, when there is no pipeline)
    tables = arch.embedding_params() if p == 1 else arch.vocab * arch.hidden
    stage_params = (layers_per_stage * arch.layer_params() + tables) / t
    dp_exposed = 0.0
    dp_ranks = par.dp * par.cp
    if dp_ranks > 1:
        dp_nodes, dp_gpn = _group(dp_ranks, t, gpus_per_node)
        grad_bytes = stage_params * GRAD_REDUCE_BYTES
        sharded = par.distributed_optimizer or par.zero_stage >= 1
        if sharded:
            reduce_s = comm.time_s("reduce_scatter", grad_bytes, dp_nodes, dp_gpn)
            gather_s = comm.time_s(
                "all_gather", stage_params * PARAM_GATHER_BYTES, dp_nodes, dp_gpn
            )
        else:
            reduce_s = comm.time_s("all_reduce", grad_bytes, dp_nodes, dp_gpn)
            gather_s = 0.0
        if par.zero_stage >= 3:  # weights gathered again for every forward and backward
            gather_s += (
                2.0
                * m
                * comm.time_s("all_gather", stage_params * PARAM_GATHER_BYTES, dp_nodes, dp_gpn)
            )
        if par.overlap_dp_comm:
            last_bwd = layers_per_stage * (layer.bwd_s + layer.recompute_s)
            first_fwd = layers_per_stage * layer.fwd_s
            reduce_s = max(0.0, reduce_s - last_bwd)
            gather_s = max(0.0, gather_s - first_fwd * (m if par.zero_stage >= 3 else 1))
        dp_exposed = reduce_s + gather_s

    # 5. optimizer on this rank's shard
    opt_params = stage_params / (dp_ranks if (par.distributed_optimizer or par.zero_stage) else 1)
    optimizer_s = rates.stream_s(opt_params * OPTIMIZER_TRAFFIC_BYTES, 4)

    step_s = m * per_micro + bubble_s + dp_exposed + optimizer_s
    tokens_per_step = par.global_batch * arch.seq_len
    return StepEstimate(
        model=arch.name,
        parallel=par,
        gpus=par.gpus,
        step_time_s=step_s,
        compute_s=m * stage_compute,
        bubble_s=bubble_s,
        tp_comm_s=m * tp_exposed,
        pp_comm_s=m * pp_exposed,
        dp_comm_s=dp_exposed,
        optimizer_s=optimizer_s,
        model_flops=arch.model_flops_per_token() * tokens_per_step,
        hardware_flops=arch.hardware_flops_per_token(par.recompute) * tokens_per_step,
        tokens_per_step=tokens_per_step,
        peak_tflops=gpu.bf16_dense_tflops,
        memory=estimate_memory(arch, par, gpu),
    )
