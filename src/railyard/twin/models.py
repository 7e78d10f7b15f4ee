"""Transformer LLM architectures and how a run splits them: parameter and FLOP counts.

The performance twin needs exact per-layer parameter and FLOP counts, not "6N", because the
Megatron tables it is validated against count recompute and attention FLOPs. Counts follow
Narayanan et al. SC'21 (arXiv 2104.04473) section 5.1, generalised to grouped-query attention and
SwiGLU by counting each weight matrix. Every preset cites where its shape comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Mlp = Literal["gelu", "swiglu"]
Recompute = Literal["none", "selective", "full"]
Precision = Literal["bf16", "fp8"]


@dataclass(frozen=True, slots=True)
class LlmArch:
    """A decoder-only transformer; defaults describe a GPT-3 style model."""

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    kv_heads: int = 0  # 0: same as heads (multi-head attention)
    ffn_hidden: int = 0  # 0: 4 x hidden
    mlp: Mlp = "gelu"
    tied_embeddings: bool = True
    learned_positions: bool = True  # GPT: a seq_len x hidden table; RoPE models: none
    biases: bool = True
    dropout: bool = True  # GPT-3/Megatron use dropout; Llama 3 does not
    kv_channels: int = 0  # head dimension when it is not hidden / heads (Megatron's name)
    experts: int = 0  # mixture of experts: routed experts per layer (0: a dense MLP)
    top_k: int = 0  # experts each token is routed to
    moe_ffn_hidden: int = 0  # one expert's FFN width (0: ffn_hidden)
    shared_experts: int = 0  # experts every token also takes (DeepSeek), each expert_ffn wide
    capacity_factor: float = 0.0  # busiest expert's tokens over the mean (0: railyard.twin.moe)
    window: int = 0  # sliding-window attention: keys each query sees (0: the whole sequence)
    window_every: int = 1  # 1: every layer windowed; 2: every other layer (GPT-OSS), ...
    kv_lora_rank: int = 0  # multi-head latent attention (DeepSeek-V2/V3): compressed K/V width
    q_lora_rank: int = 0  # MLA: compressed query width (0: queries not compressed)
    rope_head_dim: int = 0  # MLA: the decoupled rotary part of each query/key head
    v_head_dim: int = 0  # MLA: value head size (0: head_dim)
    source: str = ""

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def ffn(self) -> int:
        return self.ffn_hidden or 4 * self.hidden

    @property
    def expert_ffn(self) -> int:
        """FFN width of one expert (MoE) or of the dense MLP."""
        return (self.moe_ffn_hidden or self.ffn) if self.is_moe else self.ffn

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Query/key head size: head_dim plus MLA's rotary part."""
        return self.head_dim + self.rope_head_dim

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    def attention_matmul_params(self) -> int:
        """QKV and output projection weights. MLA (DeepSeek-V2, arXiv 2405.04434, section
        2.1.2) projects h down to a query rank and a key/value rank (plus the shared rotary
        key), and those up to per-head queries, keys and values."""
        h, d = self.hidden, self.head_dim
        if self.is_mla:
            a, r, dq = self.heads, self.kv_lora_rank, self.qk_head_dim
            q = (
                (h * self.q_lora_rank + self.q_lora_rank * a * dq)
                if self.q_lora_rank
                else h * a * dq
            )
            kv = h * (r + self.rope_head_dim) + r * a * (d + self.value_head_dim)
            return q + kv + a * self.value_head_dim * h
        return h * (self.heads + 2 * self.n_kv_heads) * d + self.heads * d * h

    def attended_keys(self, seq_len: int | None = None) -> float:
        """Keys a query attends to on average over layers: the sequence, or the window on
        windowed layers (Beltagy et al. 2020, Longformer; GPT-OSS alternates)."""
        s = seq_len or self.seq_len
        if not self.window or self.window >= s:
            return float(s)
        share = 1.0 / max(1, self.window_every)
        return share * self.window + (1.0 - share) * s

    def mlp_matmul_params(self) -> int:
        """One MLP (or one expert): in (gate + up for SwiGLU) and out."""
        f = self.expert_ffn
        return self.hidden * (2 * f if self.mlp == "swiglu" else f) + f * self.hidden

    def layer_matmul_params(self) -> int:
        """Weights of one layer's GEMMs: QKV, output projection, MLP in and out; with experts,
        the router and every expert."""
        if self.is_moe:
            router = self.hidden * self.experts
            experts = self.experts + self.shared_experts
            return self.attention_matmul_params() + router + experts * self.mlp_matmul_params()
        return self.attention_matmul_params() + self.mlp_matmul_params()

    def layer_active_matmul_params(self) -> int:
        """Weights one token multiplies by: with experts, the router and its top-k experts
        (Fedus et al. 2022, Switch Transformers, section 2: FLOPs follow the active experts)."""
        if self.is_moe:
            router = self.hidden * self.experts
            active = self.top_k + self.shared_experts
            return self.attention_matmul_params() + router + active * self.mlp_matmul_params()
        return self.layer_matmul_params()

    def layer_params(self) -> int:
        """All weights of one layer: GEMMs, their biases and two norms.

        GPT: 12h^2 + 13h per layer (Narayanan et al. section 5.1); LayerNorm has a gain and a bias
        (2h each), RMSNorm only a gain.
        """
        h = self.hidden
        bias = 0
        if self.biases:
            f = self.expert_ffn
            mlp_bias = (2 * f if self.mlp == "swiglu" else f) + h
            bias = (self.heads + 2 * self.n_kv_heads) * self.head_dim + h
            bias += mlp_bias * (self.experts if self.is_moe else 1)
        norms = 2 * (2 * h if self.biases else h)
        return self.layer_matmul_params() + bias + norms

    def embedding_params(self) -> int:
        """Input table, position table (if learned) and the output projection when untied."""
        table = self.vocab * self.hidden
        positions = self.seq_len * self.hidden if self.learned_positions else 0
        output = 0 if self.tied_embeddings else table
        return table + positions + output

    def params(self) -> int:
        """Total parameters, final norm included."""
        final_norm = 2 * self.hidden if self.biases else self.hidden
        return self.layers * self.layer_params() + self.embedding_params() + final_norm

    def layer_fwd_flops_per_token(self, seq_len: int | None = None) -> float:
        """Forward FLOPs of one layer per token: 2 per GEMM weight plus attention scores.

        Narayanan et al. section 5.1: 24h^2 + 4sh per token for GPT; the 4sh term is QK^T and
        attention-over-V (2sh each), counted over the full sequence as the paper and PaLM
        (Chowdhery et al. 2022, appendix B) do, not halved for the causal mask.
        """
        s = self.attended_keys(seq_len)
        d = (self.qk_head_dim + self.value_head_dim) / 2
        return 2.0 * self.layer_active_matmul_params() + 4.0 * s * self.heads * d

    def logits_fwd_flops_per_token(self) -> float:
        """The output projection: 2hV per token (Narayanan et al. section 5.1)."""
        return 2.0 * self.hidden * self.vocab

    def fwd_flops_per_token(self, seq_len: int | None = None) -> float:
        return self.layers * self.layer_fwd_flops_per_token(seq_len) + (
            self.logits_fwd_flops_per_token()
        )

    def model_flops_per_token(self, seq_len: int | None = None) -> float:
        """Model FLOPs for MFU: forward + backward = 3 x forward, no recompute.

        Equals 6 x (GEMM parameters incl. the output projection) + 12 l h s, the PaLM definition
        (Chowdhery et al. 2022, appendix B) without the input-embedding lookup, which does no math.
        """
        return 3.0 * self.fwd_flops_per_token(seq_len)

    def hardware_flops_per_token(self, recompute: Recompute, seq_len: int | None = None) -> float:
        """FLOPs the GPUs execute, recompute included (what Narayanan et al. Table 1 reports).

        Full recompute repeats each layer's forward: 4 x layer forward + 3 x logits, which for GPT
        is 96 B s l h^2 (1 + s/6h + V/16lh) per batch (Narayanan et al. eq. in section 5.1);
        selective recompute repeats only QK^T and attention-over-V (Korthikanti et al. 2022).
        """
        s = seq_len or self.seq_len
        extra = 0.0
        if recompute == "full":
            extra = self.layers * self.layer_fwd_flops_per_token(s)
        elif recompute == "selective":
            d = (self.qk_head_dim + self.value_head_dim) / 2
            extra = self.layers * 4.0 * self.attended_keys(s) * self.heads * d
        return self.model_flops_per_token(s) + extra


@dataclass(frozen=True, slots=True)
class Parallelism:
    """How one run splits a model (Megatron-LM terms); the product tp*pp*dp*cp is the GPU count.

    interleave is Megatron's virtual pipeline stages per GPU (v). stage_layers, when given, is
    the number of layers of each pipeline stage (uneven stages, as Llama 3 405B trained with one
    layer fewer on the first and last stage); otherwise the layers split evenly. ep is expert
    parallelism for MoE layers, taken from the data-parallel ranks. The overlap flags say which
    communication runs under computation: Megatron-LM 2021 overlapped none but torch DDP's
    gradient all-reduce; Megatron-Core 2024 overlaps all three (its README's flags).
    implementation names the software stack (railyard.twin.implementation: eager, megatron,
    megatron-te); attention, fused_loss, grad_accum_fusion, cuda_graphs and optimizer override its
    choices.
    flash_attention=False forces unfused attention (kept for older callers).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 0  # tensor-parallel ranks per expert (0: tp, Megatron-Core's default)
    micro_batch: int = 1
    global_batch: int = 1
    interleave: int = 1
    stage_layers: tuple[int, ...] = ()
    zero_stage: int = 0
    distributed_optimizer: bool = False
    recompute: Recompute = "none"
    sequence_parallel: bool = False
    precision: Precision = "bf16"
    fp8_recipe: str = "delayed"  # delayed, current or block scaling (railyard.twin.fp8)
    dispatcher: str = "alltoall"  # MoE token dispatcher: alltoall, deepep, hybridep (twin.moe)
    flash_attention: bool = True
    overlap_tp_comm: bool = False
    overlap_dp_comm: bool = True
    overlap_pp_comm: bool = False
    overlap_ep_comm: bool = False
    implementation: str = "megatron-te"
    attention: str = ""
    fused_loss: bool | None = None
    grad_accum_fusion: bool | None = None
    cuda_graphs: bool = False
    autocast: bool | None = None  # eager only: mixed precision (True, its default) or pure bf16
    optimizer: str = ""  # fused or foreach Adam; "": the implementation's

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def expert_dp(self) -> int:
        """Ranks holding the same experts: tp x dp x cp over ep x etp (Megatron-Core's
        expert-data-parallel group)."""
        return max(1, self.tp * self.dp * self.cp // (self.ep * (self.etp or self.tp)))

    @property
    def micro_batches(self) -> int:
        """Micro-batches per replica per step (m in Narayanan et al.)."""
        return self.global_batch // (self.dp * self.micro_batch)

    def layers_per_stage(self, arch: LlmArch) -> tuple[int, ...]:
        """Layers of each pipeline stage: stage_layers, or an even split (the first stages take
        one more when the division has a remainder)."""
        if self.stage_layers:
            return self.stage_layers
        base, extra = divmod(arch.layers, self.pp)
        return tuple(base + (1 if i < extra else 0) for i in range(self.pp))

    def check(self, arch: LlmArch) -> None:
        """Raise ValueError when the split cannot run this model."""
        if min(self.tp, self.pp, self.dp, self.cp, self.ep, self.micro_batch, self.interleave) < 1:
            raise ValueError("tp, pp, dp, cp, ep, micro_batch and interleave must be >= 1")
        if self.global_batch % (self.dp * self.micro_batch):
            raise ValueError(
                f"global batch {self.global_batch} is not a multiple of dp x micro_batch "
                f"= {self.dp * self.micro_batch}"
            )
        kv_split = arch.n_kv_heads % self.tp == 0 or self.tp % arch.n_kv_heads == 0
        if arch.heads % self.tp or not kv_split:
            raise ValueError(f"tp={self.tp} does not divide {arch.heads} attention heads")
        if self.pp * self.interleave > arch.layers:
            raise ValueError(f"pp x interleave = {self.pp * self.interleave} > {arch.layers}")
        if self.stage_layers:
            if len(self.stage_layers) != self.pp or min(self.stage_layers) < 1:
                raise ValueError(f"stage_layers needs {self.pp} positive counts, one per stage")
            if sum(self.stage_layers) != arch.layers:
                raise ValueError(
                    f"stage_layers add up to {sum(self.stage_layers)}, the model has {arch.layers}"
                )
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError("zero_stage must be 0, 1, 2 or 3")
        if arch.seq_len % self.cp:
            raise ValueError(f"cp={self.cp} does not divide the sequence {arch.seq_len}")
        if self.ep > 1 and not arch.is_moe:
            raise ValueError("ep > 1 needs a mixture-of-experts model (experts > 0)")
        if arch.is_moe:
            # Megatron-Core folds tp x cp x dp ranks into etp x ep x expert-dp: EP may be
            # larger than DP when experts are not split by tensor parallelism (etp < tp)
            etp = self.etp or self.tp
            ranks = self.tp * self.dp * self.cp
            if ranks % (self.ep * etp):
                raise ValueError(
                    f"ep x etp = {self.ep * etp} does not divide tp x dp x cp = {ranks}"
                )
            if arch.experts % self.ep:
                raise ValueError(f"ep={self.ep} does not divide {arch.experts} experts")
            if not 1 <= arch.top_k <= arch.experts:
                raise ValueError(f"top_k must be 1..{arch.experts}")


_NARAYANAN = "Narayanan et al. SC'21 (arXiv 2104.04473) Table 1; s 2048, V 51200"
_LLAMA3 = "Dubey et al. 2024, The Llama 3 Herd of Models (arXiv 2407.21783) Table 3"


def _gpt(name: str, layers: int, hidden: int, heads: int, source: str = _NARAYANAN) -> LlmArch:
    return LlmArch(name, layers, hidden, heads, seq_len=2048, vocab=51200, source=source)


def _llama3(name: str, layers: int, hidden: int, heads: int, ffn: int) -> LlmArch:
    return LlmArch(
        name,
        layers,
        hidden,
        heads,
        seq_len=8192,
        vocab=128256,
        kv_heads=8,
        ffn_hidden=ffn,
        mlp="swiglu",
        tied_embeddings=False,
        learned_positions=False,
        biases=False,
        dropout=False,
        source=_LLAMA3,
    )


PRESETS: dict[str, LlmArch] = {
    "gpt3-175b": _gpt("gpt3-175b", 96, 12288, 96, "Brown et al. 2020 (arXiv 2005.14165) Table 2.1"),
    "megatron-1.7b": _gpt("megatron-1.7b", 24, 2304, 24),
    "megatron-3.6b": _gpt("megatron-3.6b", 30, 3072, 32),
    "megatron-7.5b": _gpt("megatron-7.5b", 36, 4096, 32),
    "megatron-18.4b": _gpt("megatron-18.4b", 40, 6144, 48),
    "megatron-39.1b": _gpt("megatron-39.1b", 48, 8192, 64),
    "megatron-76.1b": _gpt("megatron-76.1b", 60, 10240, 80),
    "megatron-145.6b": _gpt("megatron-145.6b", 80, 12288, 96),
    "megatron-310.1b": _gpt("megatron-310.1b", 96, 16384, 128),
    "megatron-529.6b": _gpt("megatron-529.6b", 105, 20480, 128),
    "megatron-1008b": _gpt("megatron-1008b", 128, 25600, 160),
    "gpt-22b": _gpt("gpt-22b", 48, 6144, 64, "Korthikanti et al. 2022 (arXiv 2205.05198) Table 3"),
    "llama3-8b": _llama3("llama3-8b", 32, 4096, 32, 14336),
    "llama3-70b": _llama3("llama3-70b", 80, 8192, 64, 28672),
    "llama3-405b": _llama3("llama3-405b", 126, 16384, 128, 53248),
}


def preset(name: str) -> LlmArch:
    """A preset by name, with the known names in the error."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(PRESETS))}") from None
