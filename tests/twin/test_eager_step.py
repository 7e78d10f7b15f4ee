"""Eager PyTorch's step as profiled on a GPU (issue 27, item 4), and overlap that costs (item 1)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from railyard.blueprint.catalog import GPUS
from railyard.twin.attention import attention_flops, fused_attention_s
from railyard.twin.implementation import implementation
from railyard.twin.kernels import kernel_model
from railyard.twin.layer import (
    FOREACH_PASSES,
    autocast_accumulation_work,
    layer_work,
    optimizer_work,
)
from railyard.twin.memory import layer_activation_bytes
from railyard.twin.models import LlmArch, Parallelism
from railyard.twin.train import OVERLAP_COMPUTE_SLOWDOWN, _overlapped, dp_buckets, estimate_step

H100 = GPUS["H100-SXM-80GB"]
GPT_350M = LlmArch("gpt-350m", 24, 1024, 16, seq_len=2048, vocab=50304, dropout=False)


def h100() -> object:
    return kernel_model("H100-SXM-80GB", 989.5, 3.35, node_busy=False)


class NoComm:
    def time_s(self, *args: object, **kwargs: object) -> float:
        return 0.0


def test_foreach_adam_launches_by_tensor_count_or_by_chunks_whichever_is_more() -> None:
    km = kernel_model("H100-SXM-80GB", 989.5, 3.35, node_busy=False)
    impl = implementation("eager", optimizer="foreach")
    # 388 tensors of 2.65e9 elements: 11 launches by tensors (36 each), 127 by chunks of
    # 320 x 65,536 elements (MultiTensorApply.cuh); the H200 profile counted 1,024 per step
    few_big = optimizer_work(2.65e9, 2.65e9, 388, impl, km)
    assert few_big.kernels == FOREACH_PASSES * 127
    many_small = optimizer_work(1e6, 1e6, 388, impl, km)
    assert many_small.kernels == FOREACH_PASSES * 11
    assert few_big.gpu_s == pytest.approx(2.65e9 * 82 / km.bytes_s)


def test_eager_zero_grad_sets_none_and_megatron_zeroes_its_buffer() -> None:
    km = kernel_model("H100-SXM-80GB", 989.5, 3.35, node_busy=False)
    eager = optimizer_work(1e9, 1e9, 100, implementation("eager"), km)
    megatron = optimizer_work(1e9, 1e9, 100, implementation("megatron"), km)
    assert eager.gpu_s == pytest.approx(1e9 * 30 / km.bytes_s)  # fused Adam alone
    assert megatron.gpu_s == pytest.approx(1e9 * (30 + 4) / km.bytes_s)


def test_autocast_adds_gradients_only_after_the_first_micro_batch() -> None:
    km = kernel_model("H100-SXM-80GB", 989.5, 3.35, node_busy=False)
    eager = implementation("eager")
    assert autocast_accumulation_work(1e9, 10, eager, km, 1).gpu_s == 0.0
    four = autocast_accumulation_work(1e9, 10, eager, km, 4)
    assert four.gpu_s == pytest.approx(3 * 1e9 * 12 / km.bytes_s)
    assert four.kernels == 30
    assert autocast_accumulation_work(1e9, 10, implementation("megatron"), km, 4).gpu_s == 0.0


def test_eager_unfused_attention_pays_each_pass_over_the_scores() -> None:
    km = kernel_model("H100-SXM-80GB", 989.5, 3.35, node_busy=False)
    par = Parallelism(micro_batch=1, global_batch=1, implementation="eager", attention="unfused")
    eager = layer_work(GPT_350M, par, implementation("eager", attention="unfused"), "unfused",
                       km, "H100-SXM-80GB", sustained=1.0)  # fmt: skip
    fused = layer_work(GPT_350M, par, implementation("megatron"), "unfused", km,
                       "H100-SXM-80GB", sustained=1.0)  # fmt: skip
    scores = 16 * 2048 * 2048
    # 29 + 33 bytes per score in 5 + 5 kernels against Megatron's fused 4 + 6 in 1 + 1
    extra = eager.fwd.seconds["attention"] + eager.bwd.seconds["attention"]
    extra -= fused.fwd.seconds["attention"] + fused.bwd.seconds["attention"]
    assert extra == pytest.approx(scores * (62 - 10) / km.bytes_s)


def test_flash2_runs_a_head_of_80_as_96() -> None:
    kwargs = dict(batch=2, heads=32, s_q=2048, s_kv=2048, causal=True)
    f80, b80 = fused_attention_s("flash2", "H100-SXM-80GB", 989.5e12, head_dim=80, **kwargs)
    f96, b96 = fused_attention_s("flash2", "H100-SXM-80GB", 989.5e12, head_dim=96, **kwargs)
    assert (f80, b80) == pytest.approx((f96, b96))
    # cuDNN is not padded: a head of 80 does 80/96 of the work at its own rate
    c80, _ = fused_attention_s("cudnn", "H100-SXM-80GB", 989.5e12, head_dim=80, **kwargs)
    c96, _ = fused_attention_s("cudnn", "H100-SXM-80GB", 989.5e12, head_dim=96, **kwargs)
    assert c80 < c96
    assert attention_flops(2, 32, 2048, 2048, 96, causal=True) > 0


def test_eager_unfused_attention_keeps_fp32_probabilities_for_backward() -> None:
    # the H200 profile: 16.45 GiB with unfused attention against 7.36 with flash, 350M mb1:
    # 9.1 GiB over 24 layers x 16 heads x 2048^2 scores is 6.1 bytes per score
    flash = layer_activation_bytes(GPT_350M, 1, flash_attention=True)
    plain = layer_activation_bytes(GPT_350M, 1, autocast_scores=True)
    per_score = (plain - flash) / (16 * 2048 * 2048)
    assert per_score == pytest.approx(6.0)
    assert (plain - flash) * 24 / 2**30 == pytest.approx(16.45 - 7.36, rel=0.05)


def test_overlapped_communication_costs_a_share_of_what_it_hides() -> None:
    assert _overlapped(1.0, 4.0) == pytest.approx(OVERLAP_COMPUTE_SLOWDOWN)
    assert _overlapped(4.0, 1.0) == pytest.approx(3.0 + OVERLAP_COMPUTE_SLOWDOWN)
    assert _overlapped(1.0, 0.0) == pytest.approx(1.0)


def test_communication_cut_into_dependent_parts_leaves_the_last_part_exposed() -> None:
    """Four buckets of 0.25 s behind 4 s of backward: each goes once its quarter of the
    backward is done, so the last (0.25 s) is exposed however long the compute. Behind 1 s of
    compute, 4 s of traffic: the first bucket is ready at 0.25 s and the link is busy from
    then on, so 4 - 0.75 = 3.25 s show."""
    slow = OVERLAP_COMPUTE_SLOWDOWN
    assert _overlapped(1.0, 4.0, pieces=4) == pytest.approx(0.25 + slow * 0.75)
    assert _overlapped(4.0, 1.0, pieces=4) == pytest.approx(3.25 + slow * 0.75)
    assert _overlapped(1.0, 4.0, pieces=1) == pytest.approx(1.0)  # one part waits for it all
    for pieces in (2, 8, 64):  # more parts hide more, never more than independent traffic
        assert (
            _overlapped(1.0, 4.0)
            < _overlapped(1.0, 4.0, pieces)
            < _overlapped(1.0, 4.0, pieces / 2)
        )


def test_traffic_hidden_in_a_pipeline_bubble_slows_no_compute() -> None:
    """Idle time (a pipeline's warm-up or cool-down) hides traffic like compute does, but
    nothing runs there to be slowed."""
    slow = OVERLAP_COMPUTE_SLOWDOWN
    assert _overlapped(1.0, 0.0, idle_s=2.0) == pytest.approx(0.0)
    assert _overlapped(1.0, 1.0, idle_s=1.0) == pytest.approx(slow * 1.0 * 0.5)
    # four buckets behind 1 s of backward and 3 s of cool-down: the last shows, 0.75 s hide,
    # a quarter of them under compute
    assert _overlapped(1.0, 1.0, 4, idle_s=3.0) == pytest.approx(0.25 + slow * 0.75 / 4)


def test_gradient_buckets_follow_megatron_core_and_torch_ddp() -> None:
    # Megatron-Core: max(40M, 1M x DP) parameters a bucket; torch DDP: 25 MB of fp32 grads
    assert dp_buckets(400e6, 8, "megatron-te") == 10
    assert dp_buckets(400e6, 128, "megatron-te") == 4  # 128M parameters a bucket
    assert dp_buckets(1e6, 8, "megatron") == 1
    assert dp_buckets(400e6, 8, "eager") == math.ceil(400e6 * 4 / (25 * 2**20))


def test_the_optimizer_switch_reaches_the_step() -> None:
    par = Parallelism(micro_batch=2, global_batch=2, implementation="eager")
    fused = estimate_step(GPT_350M, par, H100, 8, NoComm())
    foreach = estimate_step(
        GPT_350M, dataclasses.replace(par, optimizer="foreach"), H100, 8, NoComm()
    )
    assert foreach.optimizer_s > 2 * fused.optimizer_s
    with pytest.raises(ValueError, match="unknown optimizer"):
        estimate_step(GPT_350M, dataclasses.replace(par, optimizer="sgd"), H100, 8, NoComm())


def test_eager_full_recompute_pays_torch_checkpoints_host_cost_per_layer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch.utils.checkpoint costs ~390 us of host time per checkpointed layer (torchtitan
    issue 1323): a launch-bound eager step with full recompute pays it per layer and
    micro-batch on top of the recompute's own launches; Megatron pays none of it."""
    from railyard.twin import layer, train

    small = dataclasses.replace(GPT_350M, seq_len=256)

    def step_s(impl: str) -> float:
        train._micro_batch.cache_clear()
        par = Parallelism(micro_batch=1, global_batch=4, implementation=impl, recompute="full")
        return estimate_step(small, par, H100, 8, NoComm(), gpu_name="H100-SXM-80GB").step_time_s

    eager, megatron = step_s("eager"), step_s("megatron")
    monkeypatch.setattr(layer, "EAGER_CHECKPOINT_HOST_S", 0.0)
    per_step = 4 * small.layers * 390e-6
    assert eager - step_s("eager") == pytest.approx(per_step, rel=0.01)
    assert megatron == pytest.approx(step_s("megatron"))
    train._micro_batch.cache_clear()
