"""Kernel-level formulas: GEMM tiles and waves, attention rates, element-wise traffic, launch cost.

Each test checks one formula against a hand-computed case or a published measurement.
"""

from __future__ import annotations

import math

import pytest

from railyard.twin import attention, kernels
from railyard.twin.implementation import PRESETS as IMPLEMENTATIONS
from railyard.twin.implementation import implementation
from railyard.twin.kernels import kernel_model
from railyard.twin.layer import Work, grad_accumulation_work, logits_work
from railyard.twin.models import LlmArch, Parallelism

H100_PEAK = 989.5e12


def h100(**kw: object) -> kernels.KernelModel:
    return kernel_model("H100-SXM-80GB", 989.5, 3.35, node_busy=False, **kw)  # type: ignore[arg-type]


def test_gemm_time_is_waves_of_tiles_plus_a_pipeline_fill() -> None:
    # 2048^3 on 132 SMs: 8 x 16 = 128 tiles of 256 x 128, one wave; each SM runs at
    # 0.803 x 989.5 / 132 TFLOP/s through k = 2048 plus a 256-element fill
    km = h100()
    sm_rate = 0.803 * H100_PEAK / 132
    expected = (2048 + 256) * 2 * 256 * 128 / sm_rate
    assert km.gemm_s(2048, 2048, 2048) == pytest.approx(expected)


def test_one_tile_more_than_the_sms_is_shared_out_by_stream_k() -> None:
    km = h100()
    # 11 x 12 = 132 tiles of 256 x 128 fill one wave; one more row of m would need a second
    # wave (wave quantization, NVIDIA's matmul guide): the 128 x 256 orientation's 23 x 6 = 138
    # tiles' k iterations spread over 132 SMs instead, each share begun with two pipeline fills
    # (stream-K)
    one = km.gemm_s(11 * 256, 12 * 128, 8192)
    more = km.gemm_s(11 * 256 + 1, 12 * 128, 8192)
    assert one == pytest.approx((8192 + 256) * 2 * 256 * 128 / (km.gemm_flops_s / 132))
    assert more / one == pytest.approx((138 * 8192 / 132 + 2 * 256) / (8192 + 256))
    assert more / one < (2 * 8192 + 256) / (8192 + 256)


def test_a_short_k_is_not_split_across_sms() -> None:
    km = h100()
    # 1024^3: 32 tiles, each SM's share would be 248 of k, shorter than the two fills a split
    # costs, so the tiles run in one partial wave: 1024 + 256 of k per tile
    assert km.gemm_s(1024, 1024, 1024) == pytest.approx(
        (1024 + 256) * 2 * 256 * 128 / (km.gemm_flops_s / 132)
    )


def test_training_gemms_of_2k_tokens_match_the_h200_profile() -> None:
    # benchmarks/bench_gpu_step.py --profile on an H200 (2026-11-28, torch 2.11, cuBLAS nvjet
    # kernels): a 2,048-token GEMM with a small output and a long k, 2048 x 1024 x 4096, ran in
    # 24.0 us where two waves of tiles would take 47 us
    km = kernel_model("H200-SXM-141GB", 989.0, 4.8, node_busy=False)
    assert km.gemm_s(2048, 1024, 4096) * 1e6 == pytest.approx(24.0, rel=0.15)


@pytest.mark.parametrize(("size", "published"), [(2048, 676.59), (4096, 788.72), (8192, 797.51)])
def test_bf16_gemm_by_shape_matches_a_published_h100_sweep(size: int, published: float) -> None:
    # zzc0721/torch-performance-test-data issue 79: torch bf16 matmul on one H100
    rate = 2 * size**3 / h100().gemm_s(size, size, size) / 1e12
    assert rate == pytest.approx(published, rel=0.05)


def test_a_busy_node_runs_gemms_at_the_sustained_ratio() -> None:
    alone = kernel_model("H100-SXM-80GB", 989.5, 3.35, node_busy=False)
    busy = kernel_model("H100-SXM-80GB", 989.5, 3.35, node_busy=True)
    assert busy.gemm_fraction == pytest.approx(alone.gemm_fraction * 0.845)
    assert alone.gemm_fraction == pytest.approx(0.803)
    assert kernel_model("A100-SXM-80GB", 312, 2.039, node_busy=False).gemm_fraction == 0.869


def test_fp8_gemms_run_at_twice_the_peak_times_the_parts_own_fp8_mamf() -> None:
    # Bekman's fp8 MAMF: H100 SXM 70.9% of its fp8 peak, H200 73.4%; the median for others
    fp8 = h100(fp8=True)
    assert fp8.gemm_flops_s == pytest.approx(H100_PEAK * 2 * 0.709)
    assert fp8.operand_bytes == 1.0
    h200 = kernel_model("H200-SXM-141GB", 989.5, 4.8, node_busy=False, fp8=True)
    assert h200.gemm_fraction == pytest.approx(2 * 0.734)
    l40s = kernel_model("L40S-48GB", 362, 0.864, node_busy=False, fp8=True)
    assert l40s.gemm_fraction == pytest.approx(2 * 0.739)


def test_attention_rate_is_the_published_bar_at_a_measured_point() -> None:
    # FA3 paper Figure 5: FlashAttention-2 forward, causal, head dim 128, 2k tokens: 298 TFLOP/s
    f = attention.fraction_of_peak("flash2", "H100-SXM-80GB", "fwd", causal=True, head_dim=128,
                                   seq=2048)  # fmt: skip
    assert f * 989.5 == pytest.approx(298)
    cudnn = attention.fraction_of_peak("cudnn", "H100-SXM-80GB", "bwd", causal=False,
                                       head_dim=64, seq=16384)  # fmt: skip
    assert cudnn * 989.5 == pytest.approx(433)


def test_attention_interpolates_in_log2_of_sequence_and_head_dim() -> None:
    def rate(seq: float, dim: int) -> float:
        return 989.5 * attention.fraction_of_peak(
            "flash2", "H100-SXM-80GB", "fwd", causal=False, head_dim=dim, seq=seq
        )

    assert rate(math.sqrt(1024 * 2048), 128) == pytest.approx((350 + 362) / 2)
    assert rate(2048, 91) == pytest.approx(318 + (362 - 318) * math.log2(91 / 64), rel=1e-9)
    assert rate(100, 128) == pytest.approx(309)  # held at the nearest measured length


def test_causal_backward_takes_the_forward_causal_ratio() -> None:
    args = {"head_dim": 128, "seq": 4096}
    fwd_c = attention.fraction_of_peak("flash2", "H100-SXM-80GB", "fwd", causal=True, **args)
    fwd_n = attention.fraction_of_peak("flash2", "H100-SXM-80GB", "fwd", causal=False, **args)
    bwd_n = attention.fraction_of_peak("flash2", "H100-SXM-80GB", "bwd", causal=False, **args)
    bwd_c = attention.fraction_of_peak("flash2", "H100-SXM-80GB", "bwd", causal=True, **args)
    assert bwd_c == pytest.approx(bwd_n * fwd_c / fwd_n)


def test_ampere_runs_flash2_at_its_published_fraction_and_has_no_fa3() -> None:
    h = attention.fraction_of_peak("flash2", "H100-SXM-80GB", "fwd", causal=False,
                                   head_dim=128, seq=16384)  # fmt: skip
    a = attention.fraction_of_peak("flash3", "A100-SXM-80GB", "fwd", causal=False,
                                   head_dim=128, seq=16384)  # fmt: skip
    assert a == pytest.approx(0.73)  # FA2 paper: up to 73% of A100 peak
    assert a / h == pytest.approx(attention.AMPERE_FA2_SCALE)


def test_backward_costs_several_forwards_and_dropout_slows_both() -> None:
    # FA benchmark convention: backward does 2.5x the forward FLOPs, at a lower rate
    kw = dict(batch=4, heads=24, s_q=2048, s_kv=2048, head_dim=96, causal=True)
    fwd, bwd = attention.fused_attention_s("flash2", "H100-SXM-80GB", H100_PEAK, **kw)  # type: ignore[arg-type]
    assert 2.5 < bwd / fwd < 5.0  # issue 15 measured 2.5-5x on an H100
    dfwd, dbwd = attention.fused_attention_s("flash2", "H100-SXM-80GB", H100_PEAK,
                                             dropout=True, **kw)  # type: ignore[arg-type]  # fmt: skip
    assert dfwd == pytest.approx(fwd / 0.80)
    assert dbwd == pytest.approx(bwd / 0.65)


def test_published_flash2_forward_plus_backward_on_h100() -> None:
    # Azure ND H100 v5: flash-attention's benchmark, causal, head dim 128, b 2, s 8192: 327.9
    kw = dict(batch=2, heads=16, s_q=8192, s_kv=8192, head_dim=128, causal=True)
    fwd, bwd = attention.fused_attention_s("flash2", "H100-SXM-80GB", H100_PEAK, **kw)  # type: ignore[arg-type]
    flops = attention.attention_flops(2, 16, 8192, 8192, 128, causal=True) * 3.5
    assert flops / (fwd + bwd) / 1e12 == pytest.approx(327.9, rel=0.10)


def test_launch_bound_work_waits_for_the_host() -> None:
    km = h100()  # 20 us of host per kernel, 0.9 us of gap on the GPU
    work = Work()
    work.add("elementwise", 5e-6, kernels=10)
    assert work.time_s(km) == pytest.approx(10 * 20e-6)
    assert work.host_idle_s(km) == pytest.approx(200e-6 - 5e-6 - 9e-6)
    graphs = h100(cuda_graphs=True)
    assert work.time_s(graphs) == pytest.approx(5e-6 + 10 * 0.5e-6)


def test_gradient_accumulation_bytes_per_implementation() -> None:
    km = h100()
    params = 1e9
    eager = grad_accumulation_work(params, 10, implementation("eager"), km)
    megatron = grad_accumulation_work(params, 10, implementation("megatron"), km)
    fused = grad_accumulation_work(params, 10, implementation("megatron-te"), km)
    # autocast: cast weights (6 B) and cast their bf16 gradients back (6 B); Megatron without
    # gradient-accumulation fusion: read bf16 + read/write fp32 (10 B); fused: nothing
    assert eager.gpu_s == pytest.approx(params * 12 / km.bytes_s)
    assert megatron.gpu_s == pytest.approx(params * 10 / km.bytes_s)
    assert fused.gpu_s == 0.0


def test_unfused_cross_entropy_makes_more_passes_than_the_fused_one() -> None:
    km = h100()
    arch = LlmArch("gpt", 24, 2304, 24, seq_len=2048, vocab=51200)
    par = Parallelism(micro_batch=4, global_batch=4)
    eager = logits_work(arch, par, IMPLEMENTATIONS["eager"], km).seconds["loss"]
    fused = logits_work(arch, par, IMPLEMENTATIONS["megatron-te"], km).seconds["loss"]
    logits = 4 * 2048 * 51200
    assert eager == pytest.approx(logits * 36 / km.bytes_s)
    assert fused == pytest.approx(logits * 22 / km.bytes_s)


def test_implementation_switches_override_a_preset() -> None:
    impl = implementation("megatron-te", attention="flash2", fused_loss=False, cuda_graphs=True)
    assert (impl.attention, impl.loss, impl.cuda_graphs) == ("flash2", "megatron", True)
    with pytest.raises(ValueError, match="unknown implementation"):
        implementation("jax")
    with pytest.raises(ValueError, match="unknown attention backend"):
        implementation("eager", attention="xformers")
