"""GPU memory per rank for one training split: model states plus activations, and whether it fits.

A planner has to reject splits that run out of memory before it ranks them by speed, and a
person has to see why: the result names what is needed, what is there, and what dominates.
Model states follow ZeRO (Rajbhandari et al., arXiv 1910.02054) and Megatron's distributed
optimizer; activations follow Korthikanti et al. 2022 (arXiv 2205.05198) section 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from railyard.blueprint.catalog import GpuSpec
from railyard.twin.models import LlmArch, Parallelism

# Mixed-precision Adam: fp32 master weights + momentum + variance = 12 bytes per parameter,
# bf16 weights and gradients 2 + 2 (ZeRO section 3.1, K = 12).
WEIGHT_BYTES = 2
GRAD_BYTES_ZERO = 2
OPTIMIZER_BYTES = 12
# Megatron keeps gradients in an fp32 main-grad buffer for bf16 training: 2 + 4 + 12 = 18 bytes
# per parameter undistributed, 6 + 12/d with its distributed optimizer (Megatron-LM
# docs/source/distrib_optimizer.md, "bf16 param, fp32 grads" row).
GRAD_BYTES_MEGATRON = 4
# CUDA context, NCCL buffers and caching-allocator fragmentation: a planning margin, not a
# measured figure (the PyTorch CUDA context alone is about 0.5 GB on current drivers).
RESERVED_BYTES = 4e9


@dataclass(frozen=True, slots=True)
class ModelStates:
    """Bytes per GPU of weights, gradients and optimizer state."""

    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Memory of the busiest rank; ``fits`` is False with a readable ``reason`` when it does not."""

    states: ModelStates
    activations_bytes: float
    logits_bytes: float
    needed_bytes: float
    available_bytes: float
    stage: str  # which pipeline stage is the busiest: "first", "last" or "only"

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.available_bytes

    @property
    def dominant(self) -> str:
        parts = {
            "weights": self.states.weights_bytes,
            "gradients": self.states.grads_bytes,
            "optimizer state": self.states.optimizer_bytes,
            "activations": self.activations_bytes + self.logits_bytes,
        }
        return max(parts, key=lambda k: parts[k])

    @property
    def reason(self) -> str:
        verdict = "fits" if self.fits else "does not fit"
        st, act = self.states, self.activations_bytes + self.logits_bytes
        return (
            f"{verdict}: needs {self.needed_bytes / 1e9:.1f} GB per GPU ({self.stage} stage), "
            f"{self.available_bytes / 1e9:.1f} GB usable; largest part: {self.dominant} "
            f"(weights {st.weights_bytes / 1e9:.1f}, grads {st.grads_bytes / 1e9:.1f}, "
            f"optimizer {st.optimizer_bytes / 1e9:.1f}, activations {act / 1e9:.1f} GB)"
        )


def model_state_bytes(
    params: float,
    dp: int,
    zero_stage: int = 0,
    *,
    distributed_optimizer: bool = False,
    grad_bytes: float = GRAD_BYTES_ZERO,
    optimizer_bytes: float = OPTIMIZER_BYTES,
) -> ModelStates:
    """Weights, gradients and optimizer state of ``params`` parameters held by one DP rank.

    ZeRO (Rajbhandari et al. Figure 1): stage 1 shards the optimizer state over the N_d data-
    parallel ranks, stage 2 also the gradients, stage 3 also the weights. Megatron's distributed
    optimizer shards the optimizer state like stage 1.
    """
    shard_opt = zero_stage >= 1 or distributed_optimizer
    return ModelStates(
        weights_bytes=params * WEIGHT_BYTES / (dp if zero_stage >= 3 else 1),
        grads_bytes=params * grad_bytes / (dp if zero_stage >= 2 else 1),
        optimizer_bytes=params * optimizer_bytes / (dp if shard_opt else 1),
    )


def layer_activation_bytes(
    arch: LlmArch,
    micro_batch: int,
    *,
    tp: int = 1,
    cp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    flash_attention: bool = False,
) -> float:
    """Activation bytes one layer keeps for backward, per micro-batch, on one GPU.

    Korthikanti et al. section 4.1: s b h (34 + 5 a s / h) without parallelism; with tensor
    parallelism s b h (10 + 24/t + 5 a s / (h t)); with sequence parallelism everything is /t;
    selective recompute drops the 5 a s / h attention-score term; full recompute keeps only the
    layer input (2 s b h). Generalised here by counting each saved tensor (2 bytes per bf16
    element, 1 per dropout mask), so GQA, SwiGLU and no-dropout models are covered:
      replicated without SP: two norm inputs (4), QKV and MLP inputs (4), dropout masks (2)
      split by t: Q (2), K and V (4 kv/a), projection input (2), MLP activation inputs
      (2 per ffn-in column) and outputs (2 per ffn column)
      scores: softmax output (2), dropout mask (1) and output (2) per score; none with
      FlashAttention (Dao et al. 2022), which recomputes them.
    For GPT (ffn 4h, dropout) this is exactly 10 + 24/t + 5as/(ht).
    """
    s = arch.seq_len / cp
    sbh = s * micro_batch * arch.hidden
    if recompute == "full":
        return 2.0 * sbh / (tp if sequence_parallel else 1)
    h, f = arch.hidden, arch.ffn
    replicated = 4.0 + 4.0 + (2.0 if arch.dropout else 0.0)
    kv = arch.n_kv_heads / arch.heads
    split = 2.0 + 4.0 * kv + 2.0 + (2.0 * arch.ffn_in_width + 2.0 * f) / h
    per_sbh = (replicated / tp if sequence_parallel else replicated) + split / tp
    scores = 0.0
    if recompute == "none" and not flash_attention:
        per_score = 5.0 if arch.dropout else 2.0
        scores = per_score * arch.heads * s * arch.seq_len * micro_batch / tp
    return per_sbh * sbh + scores


def in_flight_layers(layers: int, pp: int, interleave: int, micro_batches: int) -> float:
    """Layer-activations the first pipeline stage holds at its peak, in units of one layer.

    1F1B: the first stage keeps min(p, m) micro-batches of its L/p layers (Narayanan et al.
    section 2.2.1), so L layers' worth when m >= p. Interleaving with v chunks multiplies this by
    (1 + (p - 1)/(p v)) (Korthikanti et al. section 4.2.3).
    """
    per_stage = layers / pp
    held = per_stage * min(pp, micro_batches)
    if interleave > 1 and pp > 1:
        held *= 1.0 + (pp - 1) / (pp * interleave)
    return held


def estimate_memory(
    arch: LlmArch,
    par: Parallelism,
    gpu: GpuSpec,
    *,
    grad_bytes: float | None = None,
    reserved_bytes: float = RESERVED_BYTES,
) -> MemoryEstimate:
    """Memory of the busiest rank of this split on this GPU.

    Gradient bytes default to Megatron's fp32 main grads (4) unless ZeRO stage 2 or 3 is used,
    whose paper counts bf16 gradients (2). The first stage holds the input embedding and the most
    in-flight activations; the last holds the output layer (when untied) and the fp32 logits
    (s b V / t x 4 bytes for the cross-entropy). Both are computed and the larger reported.
    """
    if grad_bytes is None:
        grad_bytes = GRAD_BYTES_ZERO if par.zero_stage >= 2 else GRAD_BYTES_MEGATRON
    layers_per_stage = -(-arch.layers // par.pp)
    layer_params = arch.layer_params() * layers_per_stage / par.tp
    table = arch.vocab * arch.hidden / par.tp
    positions = arch.seq_len * arch.hidden if arch.learned_positions else 0
    first_params = layer_params + table + positions
    last_params = layer_params + (table if (not arch.tied_embeddings or par.pp > 1) else 0)
    if par.pp == 1:
        first_params = last_params = layer_params + arch.embedding_params() / par.tp
    per_layer = layer_activation_bytes(
        arch,
        par.micro_batch,
        tp=par.tp,
        cp=par.cp,
        sequence_parallel=par.sequence_parallel,
        recompute=par.recompute,
        flash_attention=par.flash_attention,
    )
    m = max(1, par.micro_batches)
    first_act = per_layer * in_flight_layers(arch.layers, par.pp, par.interleave, m)
    last_act = per_layer * layers_per_stage
    logits = 4.0 * arch.seq_len / par.cp * par.micro_batch * arch.vocab / par.tp

    def states(params: float) -> ModelStates:
        return model_state_bytes(
            params,
            par.dp * par.cp,
            par.zero_stage,
            distributed_optimizer=par.distributed_optimizer,
            grad_bytes=grad_bytes,
        )

    available = gpu.mem_gbyte * 1e9 - reserved_bytes
    first = MemoryEstimate(states(first_params), first_act, 0.0, 0.0, available, "first")
    last = MemoryEstimate(states(last_params), last_act, logits, 0.0, available, "last")
    if par.pp == 1:
        first = MemoryEstimate(states(first_params), first_act, logits, 0.0, available, "only")
        last = first
    best = max(
        (first, last),
        key=lambda e: e.states.total_bytes + e.activations_bytes + e.logits_bytes,
    )
    needed = best.states.total_bytes + best.activations_bytes + best.logits_bytes
    return MemoryEstimate(
        best.states, best.activations_bytes, best.logits_bytes, needed, available, best.stage
    )
