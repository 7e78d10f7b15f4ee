"""FP8 training as its own kernels: what each scaling recipe adds around the GEMMs.

An FP8 GEMM runs at the FP8 rate of railyard.twin.kernels (its own burst fraction, not
BF16's), but its operands must first be turned into FP8 with a scale, and how the scale is found
is the recipe (Transformer Engine's ``recipe`` module; NVIDIA, "Using FP8 with Transformer
Engine", and Micikevicius et al. 2022, "FP8 Formats for Deep Learning", arXiv 2209.05433).
Megatron-LM's ``--fp8-recipe`` defaults to ``delayed`` (megatron/training/arguments.py; its
``tensorwise`` and ``blockwise`` are this module's ``current`` and ``block``), as does TE's
``fp8_autocast`` without a recipe, so ``delayed`` is the default here too.

- ``delayed``: per-tensor scales from the amax history of earlier steps; one fused
  cast-transpose reads the bf16 tensor (2 bytes an element), writes the FP8 copy and its
  transpose for the other pass (1 + 1) and records the amax on the way: 4 bytes, one kernel.
  The recorded amaxes of every FP8 tensor are reduced once per forward and once per backward
  over the amax group (TE's ``reduce_amax``; Megatron-Core's amax reduction group spans the
  tensor-, data- and context-parallel ranks): one small all-reduce each.
- ``current``: per-tensor scales from this tensor's own amax, so an amax reduction reads the
  tensor first (2 bytes, one kernel) before the same cast-transpose: 6 bytes, two kernels.
  With sequence parallelism the amax of a tensor about to be all-gathered must be the same on
  every tensor-parallel rank: TE's column-parallel modules all-reduce their input's amax over
  the TP group forward, the row-parallel ones their output gradient's backward
  (``with_amax_reduction`` / ``amax_reduction_group`` in transformer_engine/pytorch/module/
  linear.py, layernorm_linear.py, layernorm_mlp.py): a 4-byte all-reduce the cast waits for.
- ``block``: a scale per 1 x 128 block of activations and gradients (128 x 128 of weights),
  as DeepSeek-V3 trained (arXiv 2412.19437, section 3.3): one pass finds each block's amax and
  casts (read 2, write 1), and the transposed copy needs blocks along the other axis, so it is
  quantized again from the bf16 tensor (read 2, write 1); each 128 elements also carry a fp32
  scale per copy (2 x 4 / 128): about 6.06 bytes, two kernels.
- ``mxfp8``: the OCP Microscaling format (OCP MX v1.0: an 8-bit E8M0 scale per 32 elements),
  Blackwell's tensor-core scaling; TE's MXFP8 quantizer writes the row-wise and column-wise
  copies in one pass (read 2, write 1 + 1, scales 2 x 1 / 32): about 4.06 bytes, one kernel.

Weights are cast once per step, not per micro-batch (TE keeps the FP8 weights of the first
micro-batch: ``is_first_microbatch``): the same bytes per weight element.

Not every GEMM is FP8: Megatron-Core's output layer is its own ``ColumnParallelLinear``
(megatron/core/models/gpt/gpt_model.py), not a Transformer Engine module, so it runs in bf16
inside ``fp8_autocast``; attention (QK^T and AV) stays bf16 unless FP8 attention is asked for.
"""

from __future__ import annotations

RECIPES = ("delayed", "current", "block", "mxfp8")
# Megatron-LM's names for the same recipes (--fp8-recipe)
ALIASES = {"tensorwise": "current", "blockwise": "block"}
BLOCK = 128
MX_BLOCK = 32
CAST_BYTES = {
    "delayed": 4.0,
    "current": 6.0,
    "block": 6.0 + 2 * 4.0 / BLOCK,
    "mxfp8": 4.0 + 2 * 1.0 / MX_BLOCK,
}
CAST_KERNELS = {"delayed": 1, "current": 2, "block": 2, "mxfp8": 1}
# amax all-reduces over the tensor-parallel group per layer and micro-batch under current
# scaling with sequence parallelism: QKV and FC1 inputs forward, projection and FC2 output
# gradients backward (see the module docstring)
CURRENT_AMAX_REDUCTIONS = {"fwd": 2, "bwd": 2}
AMAX_BYTES = 4.0  # one fp32 amax
# delayed scaling: amax reductions over the amax group per micro-batch (forward and backward)
DELAYED_AMAX_REDUCTIONS = 2


def recipe_name(recipe: str) -> str:
    """The recipe ``recipe`` names (Megatron's spellings accepted); ValueError if none."""
    name = ALIASES.get(recipe, recipe)
    if name not in CAST_BYTES:
        known = ", ".join([*RECIPES, *ALIASES])
        raise ValueError(f"unknown fp8 recipe {recipe!r}; known: {known}")
    return name


def cast_bytes(recipe: str) -> float:
    """Bytes moved per element turned into FP8 (and its transposed copy) under ``recipe``."""
    return CAST_BYTES[recipe_name(recipe)]


def cast_kernels(recipe: str) -> int:
    return CAST_KERNELS[recipe_name(recipe)]


def tp_amax_reductions(recipe: str, sequence_parallel: bool, tp: int) -> dict[str, int]:
    """Blocking 4-byte all-reduces over the TP group per layer and micro-batch, by pass."""
    if recipe_name(recipe) != "current" or not sequence_parallel or tp <= 1:
        return {"fwd": 0, "bwd": 0}
    return dict(CURRENT_AMAX_REDUCTIONS)


__all__ = [
    "ALIASES",
    "AMAX_BYTES",
    "CAST_BYTES",
    "CAST_KERNELS",
    "DELAYED_AMAX_REDUCTIONS",
    "RECIPES",
    "cast_bytes",
    "cast_kernels",
    "recipe_name",
    "tp_amax_reductions",
]
