"""The kernels of one mixture-of-experts MLP, for one GPU and one micro-batch.

An MoE layer is not a dense MLP with more weights. Each token's hidden state goes through a
router GEMM (tokens x experts), a softmax, a top-k selection and the auxiliary load-balancing
loss; the routed copies are permuted into expert order, sent to the ranks that hold their
experts (all-to-all, priced in railyard.twin.train), regrouped by local expert, multiplied by
each expert's weights in one grouped GEMM, and travel the same way back, where they are
un-permuted and summed with their routing weights. Megatron-Core's all-to-all dispatcher
(megatron/core/transformer/moe/token_dispatcher.py) copies the per-expert token counts to the
host to size those exchanges, so every MoE layer's forward waits once for the GPU to drain.

What each piece costs here:
- router GEMM and the local experts' GEMMs by the tile model of railyard.twin.kernels; TE's
  grouped linear on Hopper is not one kernel: nvte_multi_stream_cublas_gemm launches one cuBLAS
  GEMM per expert, round-robin on TE's 4 compute streams (transformer_engine/common/util/
  multi_stream.cpp: num_compute_streams = 4), so up to 4 experts' tiles share the SMs' waves
  at a time and a group's partial last wave is paid once per group of 4, not once per layer;
  a small per-expert batch fills its 256-token tiles only in part: small per-expert batches
  run below dense rates without a constant saying so;
- softmax, top-k and the auxiliary loss as fp32 streams over tokens x experts;
- each permute and un-permute as a gather that reads and writes every routed copy's hidden
  vector (bandwidth-bound): twice each way with Megatron's all-to-all and EP, once on the
  received side with DeepEP or HybridEP, which dispatch unpermuted tokens;
- the busiest rank sets the pace: its experts get ``imbalance`` times the mean tokens
  (the capacity factor when one caps them; ``MOE_IMBALANCE_DEFAULT`` for a dropless router);
- with FP8, every local expert's inputs get their own cast (per-expert scaling factors).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from railyard.twin.fp8 import cast_bytes, cast_kernels
from railyard.twin.kernels import KernelModel
from railyard.twin.models import LlmArch, Parallelism

# A dropless router trained with an auxiliary balancing loss is not perfectly even: the
# busiest expert takes more than the mean. Without a measured routing, 1.25 is taken, the
# capacity factor Switch Transformers trains with (Fedus et al. 2022, JMLR, section 2.2 and
# Table 1: capacity factor 1.25 lost no quality against 2.0), i.e. the load a router is held to
# when a cap is set. A capacity factor given with the model replaces it, and benchmarks that
# force-balance their tokens (NVIDIA's Megatron-Bridge performance tables) give 1.
MOE_IMBALANCE_DEFAULT = 1.25
# fp32 bytes per router logit: forward softmax (read 4, write 4), top-k (read 4), the aux
# loss's sum of probabilities over tokens (read 4); backward the top-k scatter of gradients
# (write 4), the aux loss's gradient (write 4) and softmax backward (read 8, write 4)
# (megatron/core/transformer/moe/router.py, moe_utils.py: topk_softmax_with_capacity,
# switch_load_balancing_loss_func; unfused).
ROUTER_FWD_BYTES_PER_LOGIT = 16.0
ROUTER_BWD_BYTES_PER_LOGIT = 20.0
ROUTER_FWD_KERNELS = 6  # softmax, top-k, scatter to a dense map, histogram, aux-loss sum, scale
ROUTER_BWD_KERNELS = 4
# A permute reads and writes each routed copy (2 bytes per element): 4 h bytes; two kernels
# (the index sort and the gather). With EP > 1 there are two permutes each way: tokens are
# sorted by destination rank before the all-to-all and regrouped by local expert after it
# (sort_chunks_by_idxs), and the same on the way back.
PERMUTE_BYTES_PER_COPY_ELEMENT = 4.0
PERMUTE_KERNELS = 2
# Experts whose GEMMs run at once in TE's multi-stream grouped GEMM (see the module docstring).
GROUPED_GEMM_STREAMS = 4


def grouped_gemm_s(km: KernelModel, m: float, n: float, k: float, experts: int) -> float:
    """``experts`` GEMMs of one shape, launched one per expert on GROUPED_GEMM_STREAMS streams:
    each group of concurrent GEMMs shares the SMs' waves, the groups follow one another."""
    full, rest = divmod(experts, GROUPED_GEMM_STREAMS)
    t = full * km.gemm_s(m, n, k, batch=GROUPED_GEMM_STREAMS) if full else 0.0
    return t + (km.gemm_s(m, n, k, batch=rest) if rest else 0.0)


@dataclass(frozen=True, slots=True)
class MoeWork:
    """GPU seconds and kernels of one MoE MLP, forward and backward (one micro-batch)."""

    fwd_gemm_s: float
    bwd_gemm_s: float
    expert_gemm_s: float  # forward + backward of the local experts (hides the all-to-all)
    gemm_kernels: int  # forward GEMM launches; backward launches twice as many
    fwd_stream_s: float  # router kernels, permutes, per-expert casts
    bwd_stream_s: float
    fwd_stream_kernels: int
    bwd_stream_kernels: int
    host_syncs: int  # device-to-host copies of token counts per forward
    routed_tokens: float  # token copies this rank's experts process (busiest rank)


def imbalance(arch: LlmArch) -> float:
    """The busiest expert's tokens over the mean: the capacity factor, else the default."""
    return arch.capacity_factor if arch.capacity_factor > 0 else MOE_IMBALANCE_DEFAULT


def expert_tp(par: Parallelism) -> int:
    """Tensor-parallel ranks that split each expert (Megatron's expert_tensor_parallel_size;
    0 in the split means the same as tp, Megatron-Core's default)."""
    return par.etp or par.tp


def moe_work(arch: LlmArch, par: Parallelism, km: KernelModel, tokens: float) -> MoeWork:
    """One MoE MLP on one GPU; ``tokens`` pass this GPU's attention (after CP, before SP)."""
    h, e = arch.hidden, arch.experts
    etp = expert_tp(par)
    f_exp = arch.expert_ffn / etp
    f_in = 2 * f_exp if arch.mlp == "swiglu" else f_exp
    # the router sees this rank's tokens once (all TP ranks compute it on the full tokens)
    rf, rb = km.gemm_fwd_bwd_s(tokens, e, h)
    logits = tokens * e
    fwd_stream = km.stream_s(logits * ROUTER_FWD_BYTES_PER_LOGIT)
    bwd_stream = km.stream_s(logits * ROUTER_BWD_BYTES_PER_LOGIT)
    fwd_k, bwd_k = ROUTER_FWD_KERNELS, ROUTER_BWD_KERNELS
    # tokens routed to this rank's experts: all copies of the ep x etp ranks' tokens spread
    # over the experts; the busiest rank gets `imbalance` times its share
    ep = par.ep
    local = max(1, e // ep)
    tp_tokens = tokens / par.tp if par.sequence_parallel else tokens
    # distinct tokens that reach one expert slice: every EP rank's, gathered over the etp
    # ranks of a slice when sequence parallelism split them
    group_tokens = tp_tokens * ep * (etp if par.sequence_parallel else 1)
    per_expert = group_tokens * arch.top_k / e * imbalance(arch)
    fwd_gemm = rf
    bwd_gemm = rb
    for n, k in ((f_in, h), (h, f_exp)):
        fwd_gemm += grouped_gemm_s(km, per_expert, n, k, local)
        bwd_gemm += grouped_gemm_s(km, per_expert, k, n, local)
        bwd_gemm += grouped_gemm_s(km, k, n, per_expert, local)
    expert_gemm = fwd_gemm + bwd_gemm - rf - rb
    # shared experts: a dense MLP every token takes (DeepSeek, Qwen2-MoE)
    if arch.shared_experts:
        f_sh = arch.shared_experts * arch.expert_ffn / par.tp
        f_sh_in = 2 * f_sh if arch.mlp == "swiglu" else f_sh
        for n, k in ((f_sh_in, h), (h, f_sh)):
            f, b = km.gemm_fwd_bwd_s(tokens, n, k)
            fwd_gemm, bwd_gemm = fwd_gemm + f, bwd_gemm + b
    routed = local * per_expert
    permutes, move = _permutes(arch, par, km, tp_tokens, routed)
    fwd_stream += 2 * move  # permute and un-permute
    bwd_stream += 2 * move
    fwd_k += 2 * permutes * PERMUTE_KERNELS
    bwd_k += 2 * permutes * PERMUTE_KERNELS
    if km.operand_bytes == 1.0:
        # fp8: each local expert's inputs are cast with their own scaling factor forward, its
        # output gradients backward, at the recipe's bytes (railyard.twin.fp8)
        per, kernels = cast_bytes(par.fp8_recipe), cast_kernels(par.fp8_recipe)
        fwd_stream += km.stream_s(routed * per * (h + f_exp))
        bwd_stream += km.stream_s(routed * per * (h + f_in))
        fwd_k += 2 * local * kernels
        bwd_k += 2 * local * kernels
    return MoeWork(
        fwd_gemm, bwd_gemm, expert_gemm, 1 + 2 * local + (2 if arch.shared_experts else 0),
        fwd_stream, bwd_stream, fwd_k, bwd_k, 1 if ep > 1 else 0, routed,
    )  # fmt: skip


def _permutes(
    arch: LlmArch, par: Parallelism, km: KernelModel, tp_tokens: float, routed: float
) -> tuple[int, float]:
    """(permutes each way, seconds of one permute-and-unpermute's traffic).

    One rank alone permutes its tokens x top_k copies into expert order once. Megatron's
    alltoall dispatcher with EP permutes twice: into destination-rank order before the
    all-to-all and, with sort_chunks_by_idxs, into local-expert order after it
    (megatron/core/transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher). DeepEP
    and HybridEP take the unpermuted hidden states with the routing map
    (``buffer.dispatch(x, topk_idx=...)``; ``hybrid_ep_dispatch(x, routing_map=...)``), so
    only the received side permutes: each distinct token vector that arrived is read once
    and written once per local expert it goes to (_DeepepManager's permute,
    HybridEP's own permute blocks)."""
    h = arch.hidden
    if par.ep <= 1:
        return 1, km.stream_s(tp_tokens * arch.top_k * h * PERMUTE_BYTES_PER_COPY_ELEMENT)
    if par.dispatcher not in DEDUP_DISPATCHERS:
        copies = tp_tokens * arch.top_k + routed
        return 2, km.stream_s(copies * h * PERMUTE_BYTES_PER_COPY_ELEMENT)
    # distinct vectors that reach this rank: each token of every EP rank reaches
    # groups_hit of the ep ranks, so one rank receives tp_tokens x groups_hit of them
    received = tp_tokens * groups_hit(arch.experts, arch.top_k, par.ep) * imbalance(arch)
    half = PERMUTE_BYTES_PER_COPY_ELEMENT / 2.0  # bf16 read, or bf16 write
    return 1, km.stream_s((received + routed) * h * half)


# Dispatchers that send a token once to each node (over RDMA, to the GPU of the same rail) and
# once to each GPU (over NVLink) among those its experts are on, and copy it per expert there:
# DeepEP's normal kernels (github.com/deepseek-ai/DeepEP README; DeepSeek-V3 technical report,
# arXiv 2412.19437, section 3.2.2: "first transmitted via IB to the GPUs with the same in-node
# index on target nodes ... then forwarded via NVLink") and NVIDIA's HybridEP (Megatron-Core's
# flex dispatcher). Megatron's alltoall dispatcher sends every (token, expert) copy.
DEDUP_DISPATCHERS = ("deepep", "hybridep")


def groups_hit(experts: int, top_k: int, groups: int) -> float:
    """Expected distinct groups (nodes, or GPUs) a token's top_k distinct experts fall in, the
    experts spread evenly over ``groups`` and routing uniform (force-balanced benchmarks):
    groups x (1 - C(E - E/g, k) / C(E, k))."""
    if groups <= 1:
        return 1.0
    per = experts // groups
    if per < 1 or top_k > experts:
        return float(min(top_k, groups))
    miss = math.comb(experts - per, top_k) / math.comb(experts, top_k)
    return groups * (1.0 - miss)


def dispatch_s(
    arch: LlmArch,
    par: Parallelism,
    tokens: float,
    ep_nodes: int,
    ep_gpn: int,
    alltoall_s: Callable[[float, int, int], float],
) -> float:
    """One dispatch (or combine) of this rank's tokens to the EP group, by the split's
    dispatcher; ``alltoall_s(size_bytes, nodes, gpus_per_node)`` is the collective model's
    all-to-all. A deduplicating dispatcher sends each token's hidden vector once to every other
    node it is routed to (one GPU per node on each rail: an all-to-all over the nodes) and once
    over NVLink to every GPU of the node it is routed to, the two pipelined chunk by chunk."""
    if par.dispatcher not in DEDUP_DISPATCHERS:
        return alltoall_s(alltoall_bytes(arch, par, tokens), ep_nodes, ep_gpn)
    tp_tokens = tokens / par.tp if par.sequence_parallel else tokens
    vector = tp_tokens * arch.hidden * 2.0 * imbalance(arch)
    ranks = ep_nodes * ep_gpn
    # every distinct GPU a token reaches gets one copy; an all-to-all prices S(n-1)/n leaving
    nvlink = alltoall_s(vector * groups_hit(arch.experts, arch.top_k, ranks), 1, ep_gpn)
    if ep_nodes <= 1:
        return nvlink
    nodes = groups_hit(arch.experts, arch.top_k, ep_nodes)
    # the all-to-all over nodes (one GPU each) sends S(n-1)/n away: S = bytes for all nodes hit
    rdma = alltoall_s(vector * nodes, ep_nodes, 1)
    return max(nvlink, rdma)


def alltoall_bytes(arch: LlmArch, par: Parallelism, tokens: float) -> float:
    """Bytes one rank sends in one dispatch (or combine) all-to-all: its routed copies of the
    hidden vector in bf16, the busiest rank's share of them."""
    tp_tokens = tokens / par.tp if par.sequence_parallel else tokens
    return tp_tokens * arch.top_k * arch.hidden * 2.0 * imbalance(arch)


__all__ = [
    "DEDUP_DISPATCHERS",
    "GROUPED_GEMM_STREAMS",
    "MOE_IMBALANCE_DEFAULT",
    "MoeWork",
    "alltoall_bytes",
    "dispatch_s",
    "expert_tp",
    "grouped_gemm_s",
    "groups_hit",
    "imbalance",
    "moe_work",
]
