"""Eager PyTorch with and without autocast: score bytes kept and moved, loss, accumulation."""

from __future__ import annotations

import dataclasses

import pytest

from railyard.blueprint.catalog import GPUS
from railyard.twin.implementation import for_split, implementation
from railyard.twin.kernels import kernel_model
from railyard.twin.layer import autocast_accumulation_work, grad_accumulation_work
from railyard.twin.memory import estimate_memory
from railyard.twin.models import LlmArch, Parallelism
from railyard.twin.spec import split_from_fields
from railyard.twin.train import estimate_step

H100 = GPUS["H100-SXM-80GB"]
GPT_124M = LlmArch("gpt-124m", 12, 768, 12, seq_len=1024, vocab=50304)  # dropout on


class NoComm:
    def time_s(self, *args: object, **kwargs: object) -> float:
        return 0.0


def _split(autocast: bool) -> Parallelism:
    return Parallelism(micro_batch=8, global_batch=8, implementation="eager",
                       attention="unfused", autocast=autocast)  # fmt: skip


def test_pure_bf16_keeps_five_bytes_a_score_where_autocast_keeps_seven() -> None:
    amp = estimate_memory(GPT_124M, _split(True), H100).activations_bytes
    bf16 = estimate_memory(GPT_124M, _split(False), H100).activations_bytes
    scores = 12 * 12 * 1024 * 1024 * 8  # layers x heads x s^2 x micro-batch
    assert (amp - bf16) / scores == pytest.approx(7.0 - 5.0, rel=0.02)


def test_pure_bf16_moves_fewer_bytes_through_softmax_and_the_loss() -> None:
    amp = estimate_step(GPT_124M, _split(True), H100, 1, NoComm())
    bf16 = estimate_step(GPT_124M, _split(False), H100, 1, NoComm())
    assert bf16.breakdown["attention"] < amp.breakdown["attention"]
    assert bf16.breakdown["loss"] < amp.breakdown["loss"]
    assert for_split(_split(False)).loss == "eager-bf16"


def test_pure_bf16_gradients_accumulate_in_bf16_after_the_first_micro_batch() -> None:
    impl = implementation("eager", autocast=False)
    km = kernel_model("H100-SXM-80GB", 989.5, 3.35)
    assert grad_accumulation_work(1e8, 10, impl, km).gpu_s == 0.0  # no casts, no fp32 buffer
    four = autocast_accumulation_work(1e8, 10, impl, km, 4).gpu_s
    assert four == pytest.approx(3 * km.stream_s(1e8 * 6.0))


def test_autocast_is_an_eager_switch_only() -> None:
    with pytest.raises(ValueError, match="autocast"):
        implementation("megatron-te", autocast=True)
    par = split_from_fields({"impl": "eager", "autocast": "false"})
    assert for_split(par).autocast is False
    assert for_split(dataclasses.replace(par, autocast=None)).autocast is True
