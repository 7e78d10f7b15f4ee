"""FP8 training as its own kernels: what each scaling recipe adds around the GEMMs.

An FP8 GEMM runs at the FP8 rate of railyard.twin.kernels (its own burst fraction, not
BF16's), but its operands must first be turned into FP8 with a scale, and how the scale is found
is the recipe (Transformer Engine's ``recipe`` module; NVIDIA, "Using FP8 with Transformer
Engine", and Micikevicius et al. 2022, "FP8 Formats for Deep Learning", arXiv 2209.05433):

- ``delayed``: per-tensor scales from the amax history of earlier steps; one fused
  cast-transpose reads the bf16 tensor (2 bytes an element), writes the FP8 copy and its
  transpose for the other pass (1 + 1) and records the amax on the way: 4 bytes, one kernel.
- ``current``: per-tensor scales from this tensor's own amax, so an amax reduction reads the
  tensor first (2 bytes, one kernel) before the same cast-transpose: 6 bytes, two kernels.
- ``block``: a scale per 1 x 128 block of activations and gradients (128 x 128 of weights),
  as DeepSeek-V3 trained (arXiv 2412.19437, section 3.3): one pass finds each block's amax and
  casts (read 2, write 1), and the transposed copy needs blocks along the other axis, so it is
  quantized again from the bf16 tensor (read 2, write 1); each 128 elements also carry a fp32
  scale per copy (2 x 4 / 128): about 6.06 bytes, two kernels.

Weights are cast once per step, not per micro-batch (TE keeps the FP8 weights of the first
micro-batch: ``is_first_microbatch``): the same bytes per weight element.
"""

from __future__ import annotations

RECIPES = ("delayed", "current", "block")
BLOCK = 128
CAST_BYTES = {"delayed": 4.0, "current": 6.0, "block": 6.0 + 2 * 4.0 / BLOCK}
CAST_KERNELS = {"delayed": 1, "current": 2, "block": 2}


def cast_bytes(recipe: str) -> float:
    """Bytes moved per element turned into FP8 (and its transposed copy) under ``recipe``."""
    try:
        return CAST_BYTES[recipe]
    except KeyError:
        raise ValueError(f"unknown fp8 recipe {recipe!r}; known: {', '.join(RECIPES)}") from None


def cast_kernels(recipe: str) -> int:
    return CAST_KERNELS[recipe]


__all__ = ["CAST_BYTES", "CAST_KERNELS", "RECIPES", "cast_bytes", "cast_kernels"]
