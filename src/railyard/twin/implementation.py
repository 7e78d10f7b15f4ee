"""How a training step is implemented: which kernels are fused and what that costs in traffic.

The same model and split run at different speeds in eager PyTorch and in Megatron with
Transformer Engine, because the second fuses what the first leaves as separate passes over HBM.
Each switch below names one such choice and the traffic it adds or removes; a preset bundles the
choices of one software stack, and any switch can be overridden.

- ``fused_elementwise``: Megatron's fused kernels (bias + GeLU, bias + dropout + residual add,
  scale + mask + softmax; megatron/core/fusions) against one PyTorch operator per step.
- ``fused_bias_grad``: the bias gradient folded into the weight-gradient GEMM's epilogue
  (cuBLASLt BGRADB, used by Transformer Engine's linear layers) against a separate reduction
  ``grad_out.sum(0)`` that reads the output gradient once more per biased linear layer.
- ``grad_accum_fusion``: Megatron's ``--gradient-accumulation-fusion`` (the weight-gradient GEMM
  accumulates straight into the fp32 ``main_grad``) against a bf16 gradient that is then added
  to an fp32 buffer (read 2 + read 4 + write 4 bytes per parameter per micro-batch).
- ``autocast``: eager mixed precision keeps fp32 weights and casts each to bf16 once per
  forward (read 4, write 2 bytes per parameter per micro-batch).
- ``fused_loss``: Megatron-Core's ``--cross-entropy-loss-fusion`` against the unfused fp32
  cross-entropy, which makes extra passes over the logits and, in eager PyTorch, holds an fp32
  log-softmax and an fp32 gradient (8 s b V bytes) at the peak of backward.
- ``cuda_graphs``: the step replays a captured graph, so the host launches nothing per kernel.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from railyard.twin.attention import BACKENDS, resolve_backend
from railyard.twin.links import gpu_arch
from railyard.twin.models import Parallelism

# Bytes per logit of the cross-entropy, forward + backward, and the fp32 temporaries held at the
# peak of backward (bytes per logit):
# - eager PyTorch F.cross_entropy under autocast: cast to fp32 (read 2, write 4), log_softmax
#   (read 4, write 4), nll_loss backward fills a dense fp32 gradient (write 4), log_softmax
#   backward (read 4 + 4, write 4), cast back to bf16 (read 4, write 2): 36 bytes, 6 kernels;
#   the saved fp32 log-softmax and the fp32 gradient, 8 bytes, are the temporary.
# - Megatron's VocabParallelCrossEntropy (megatron/core/tensor_parallel/cross_entropy.py):
#   .float() (6), max (4), subtract max in place (8), exp in place (8), sum (4), divide in
#   place (8); backward multiplies in place (8) and casts to bf16 (6): 52 bytes, 8 kernels;
#   the in-place fp32 softmax is the saved tensor, the bf16 cast (2) the temporary.
# - fused (Megatron-Core --cross-entropy-loss-fusion, TorchScript-fused passes): cast + max,
#   exp + sum, normalise, backward scale: about 22 bytes, 4 kernels, nothing extra.
# - eager PyTorch F.cross_entropy on bf16 logits without autocast ("eager-bf16"): log_softmax
#   in bf16 (read 2, write 2), nll_loss backward's dense gradient (write 2), log_softmax
#   backward (read 2 + 2, write 2): 12 bytes, 4 kernels; the saved log-softmax and the
#   gradient, 4 bytes, are the temporary.
LOSS_BYTES_PER_LOGIT = {"eager": 36.0, "eager-bf16": 12.0, "megatron": 52.0, "fused": 22.0}
LOSS_KERNELS = {"eager": 6, "eager-bf16": 4, "megatron": 8, "fused": 4}
LOSS_TEMP_BYTES_PER_LOGIT = {"eager": 8.0, "eager-bf16": 4.0, "megatron": 2.0, "fused": 0.0}
# Adam step traffic per parameter it updates: Megatron's fused Adam (apex/TE multi-tensor
# kernel) reads fp32 grad, master, m, v (16) and writes master, m, v (12) and the bf16 copy (2);
# torch.optim.AdamW's default foreach path runs about eight passes (decay, lerp m, scale v,
# addcmul v, sqrt, divide, add eps, addcdiv): about 82 bytes.
OPTIMIZER_BYTES = {"fused": 30.0, "foreach": 82.0}
# Gradient zeroing once per step: a memset of the fp32 gradient buffer.
ZERO_GRAD_BYTES = 4.0


@dataclass(frozen=True, slots=True)
class Implementation:
    """One software stack's kernel choices (see the module docstring)."""

    name: str
    attention: str  # flash2, flash3, cudnn, unfused
    fused_elementwise: bool
    fused_bias_grad: bool
    grad_accum_fusion: bool
    autocast: bool
    loss: str  # eager, megatron, fused
    optimizer: str  # fused, foreach
    cuda_graphs: bool = False

    @property
    def grads_set_to_none(self) -> bool:
        """Eager PyTorch's zero_grad sets .grad to None (its default since torch 2.0):
        the first micro-batch stores its gradient, no buffer is zeroed."""
        return self.name == "eager"

    @property
    def fused_loss(self) -> bool:
        return self.loss == "fused"


PRESETS: dict[str, Implementation] = {
    # PyTorch eager + SDPA (its flash backend is FlashAttention-2, PyTorch 2.2 release notes),
    # AMP autocast, AdamW(fused=True) as nanoGPT's configure_optimizers picks on CUDA (a bare
    # torch.optim.AdamW runs its foreach path, the default on CUDA: --optimizer foreach)
    "eager": Implementation(
        "eager", attention="flash2", fused_elementwise=False, fused_bias_grad=False,
        grad_accum_fusion=False, autocast=True, loss="eager", optimizer="fused",
    ),
    # Megatron-LM without Transformer Engine (the SC'21 runs): fused element-wise kernels,
    # unfused attention with fused scale-mask-softmax, bf16/fp16 weights with fp32 main grads
    "megatron": Implementation(
        "megatron", attention="unfused", fused_elementwise=True, fused_bias_grad=False,
        grad_accum_fusion=False, autocast=False, loss="megatron", optimizer="fused",
    ),
    # Megatron-Core + Transformer Engine: cuDNN fused attention on Hopper (FA2 on Ampere: "TE
    # prefers cuDNN flash attention on Hopper+ and Tri Dao's on Ampere", NVIDIA/NeMo PR 9188),
    # BGRADB epilogues, gradient-accumulation fusion, fused cross-entropy
    "megatron-te": Implementation(
        "megatron-te", attention="cudnn", fused_elementwise=True, fused_bias_grad=True,
        grad_accum_fusion=True, autocast=False, loss="fused", optimizer="fused",
    ),
}  # fmt: skip


@functools.lru_cache(maxsize=256)
def implementation(
    name: str,
    *,
    attention: str | None = None,
    fused_loss: bool | None = None,
    optimizer: str | None = None,
    grad_accum_fusion: bool | None = None,
    cuda_graphs: bool | None = None,
    autocast: bool | None = None,
) -> Implementation:
    """A preset with any switch overridden; ValueError names the known values."""
    try:
        impl = PRESETS[name]
    except KeyError:
        raise ValueError(
            f"unknown implementation {name!r}; known: {', '.join(sorted(PRESETS))}"
        ) from None
    changes: dict[str, object] = {}
    if attention is not None:
        if attention not in BACKENDS:
            raise ValueError(
                f"unknown attention backend {attention!r}; known: {', '.join(BACKENDS)}"
            )
        changes["attention"] = attention
    if autocast is not None and autocast != impl.autocast:
        if name != "eager":
            raise ValueError(f"autocast: applies to impl=eager only, not {name}")
        # pure bf16 eager: bf16 weights and gradients, bf16 softmax and cross-entropy
        changes["autocast"] = autocast
        changes["loss"] = "eager" if autocast else "eager-bf16"
    if fused_loss is not None:
        unfused = (
            ("eager" if changes.get("autocast", impl.autocast) else "eager-bf16")
            if (name == "eager")
            else "megatron"
        )
        changes["loss"] = "fused" if fused_loss else unfused
    if optimizer is not None:
        if optimizer not in OPTIMIZER_BYTES:
            raise ValueError(f"unknown optimizer {optimizer!r}; known: fused, foreach")
        changes["optimizer"] = optimizer
    if grad_accum_fusion is not None:
        changes["grad_accum_fusion"] = grad_accum_fusion
    if cuda_graphs is not None:
        changes["cuda_graphs"] = cuda_graphs
    return dataclasses.replace(impl, **changes)  # type: ignore[arg-type]


def for_split(par: Parallelism) -> Implementation:
    """The implementation a split names, with its overrides; flash_attention=False forces
    unfused attention."""
    attention = par.attention or None
    if not par.flash_attention:
        attention = "unfused"
    return implementation(
        par.implementation,
        attention=attention,
        fused_loss=par.fused_loss,
        grad_accum_fusion=par.grad_accum_fusion,
        cuda_graphs=par.cuda_graphs or None,
        optimizer=par.optimizer or None,
        autocast=par.autocast,
    )


def attention_backend(impl: Implementation, gpu_name: str) -> str:
    """The attention kernels that run: TE's cuDNN attention needs Hopper, FA3 too."""
    if impl.attention == "cudnn" and gpu_arch(gpu_name) == "ampere":
        return "flash2"
    return resolve_backend(impl.attention, gpu_name)


__all__ = [
    "LOSS_BYTES_PER_LOGIT",
    "OPTIMIZER_BYTES",
    "PRESETS",
    "Implementation",
    "attention_backend",
    "for_split",
    "implementation",
]
