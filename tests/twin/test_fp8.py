"""FP8 as its own kernels: the recipe sets the cast traffic, weights are cast once a step."""

from __future__ import annotations

import dataclasses

import pytest
from tests.twin.test_train import FakeComm

from railyard.blueprint.catalog import GPUS
from railyard.twin.fp8 import cast_bytes, recipe_name, tp_amax_reductions
from railyard.twin.models import PRESETS, Parallelism
from railyard.twin.spec import SpecError, split_from_fields
from railyard.twin.train import estimate_step

H100 = GPUS["H100-SXM-80GB"]
LLAMA = PRESETS["llama3-8b"]


def _step(**split: object) -> float:
    par = Parallelism(
        dp=8, micro_batch=1, global_batch=8, precision="fp8", distributed_optimizer=True
    )
    par = dataclasses.replace(par, **split)  # type: ignore[arg-type]
    return estimate_step(LLAMA, par, H100, 8, FakeComm()).breakdown["elementwise"]


def test_current_scaling_reads_each_tensor_once_more_than_delayed() -> None:
    assert cast_bytes("current") - cast_bytes("delayed") == pytest.approx(2.0)
    assert cast_bytes("block") > cast_bytes("current")  # per-block fp32 scales
    delayed, current = _step(fp8_recipe="delayed"), _step(fp8_recipe="current")
    assert current > delayed


def test_weights_are_cast_once_per_step_not_per_micro_batch() -> None:
    one = _step(global_batch=8)
    two = _step(global_batch=16)
    # a second micro-batch adds its activations' casts, not a second weight cast: the step's
    # element-wise time less than doubles by more than the weight cast
    per_step_weight_cast = 8.03e9 * cast_bytes("delayed") / (H100.mem_bw_tbyte_s * 1e12 * 0.85)
    assert two < 2 * one - 0.5 * per_step_weight_cast


def test_an_unknown_recipe_names_the_field() -> None:
    with pytest.raises(SpecError, match="fp8_recipe"):
        split_from_fields({"fp8_recipe": "mxfp4"})


def test_megatron_spellings_name_the_same_recipes() -> None:
    assert recipe_name("tensorwise") == "current"
    assert recipe_name("blockwise") == "block"
    assert cast_bytes("mxfp8") < cast_bytes("current")  # one pass writes both copies
    with pytest.raises(ValueError, match="known"):
        recipe_name("nvfp4")


def test_the_output_layer_stays_bf16_under_fp8() -> None:
    # Megatron-Core's output layer is not a TE module: its GEMMs run at the bf16 rate, so a
    # bigger vocabulary costs an fp8 step more than the fp8 rate alone would say
    small, big = dataclasses.replace(LLAMA, vocab=32000), LLAMA
    par = Parallelism(dp=8, micro_batch=1, global_batch=8, precision="fp8")
    bf = dataclasses.replace(par, precision="bf16")
    gemm = {
        (arch.vocab, p.precision): estimate_step(arch, p, H100, 8, FakeComm()).breakdown["gemm"]
        for arch in (small, big)
        for p in (par, bf)
    }
    head_bf16 = gemm[(128256, "bf16")] - gemm[(32000, "bf16")]
    head_fp8 = gemm[(128256, "fp8")] - gemm[(32000, "fp8")]
    assert head_fp8 == pytest.approx(head_bf16, rel=1e-6)


def test_current_scaling_with_sequence_parallelism_reduces_amaxes_over_tp() -> None:
    assert tp_amax_reductions("current", True, 4) == {"fwd": 2, "bwd": 2}
    assert tp_amax_reductions("current", False, 4) == {"fwd": 0, "bwd": 0}
    assert tp_amax_reductions("delayed", True, 4) == {"fwd": 0, "bwd": 0}
