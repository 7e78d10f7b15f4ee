"""Memory per GPU against the ZeRO and Korthikanti et al. check values."""

from __future__ import annotations

import dataclasses

import pytest

from railyard.blueprint.catalog import GPUS
from railyard.twin.memory import (
    estimate_memory,
    in_flight_layers,
    layer_activation_bytes,
    model_state_bytes,
)
from railyard.twin.models import PRESETS, LlmArch, Parallelism

GIB = 2.0**30
A100 = GPUS["A100-SXM-80GB"]
GPT22B = PRESETS["gpt-22b"]
GPT175B = PRESETS["gpt3-175b"]


@pytest.mark.parametrize(
    ("stage", "published_gb"), [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)]
)  # fmt: skip
def test_zero_figure_1_check_values(stage: int, published_gb: float) -> None:
    # ZeRO (arXiv 1910.02054) Figure 1: 7.5B parameters, N_d = 64, K = 12; GB is 1e9 bytes
    states = model_state_bytes(7.5e9, 64, stage)
    assert states.total_bytes / 1e9 == pytest.approx(published_gb, abs=0.05)


def test_zero_stages_shard_what_the_paper_says() -> None:
    psi, nd = 1e9, 8
    s1, s2, s3 = (model_state_bytes(psi, nd, k) for k in (1, 2, 3))
    assert s1.optimizer_bytes == pytest.approx(12 * psi / nd)
    assert s1.grads_bytes == pytest.approx(2 * psi)
    assert s2.grads_bytes == pytest.approx(2 * psi / nd)
    assert s3.weights_bytes == pytest.approx(2 * psi / nd)


def test_ten_billion_parameters_of_optimizer_state_is_120_gb() -> None:
    assert model_state_bytes(10e9, 1).optimizer_bytes / 1e9 == pytest.approx(120.0)


def test_megatron_distributed_optimizer_is_6_plus_12_over_d() -> None:
    # Megatron-LM distrib_optimizer.md: bf16 params with fp32 grads, 18 -> 6 + 12/d bytes
    plain = model_state_bytes(1.0, 4, grad_bytes=4)
    sharded = model_state_bytes(1.0, 4, distributed_optimizer=True, grad_bytes=4)
    assert plain.total_bytes == pytest.approx(18.0)
    assert sharded.total_bytes == pytest.approx(6 + 12 / 4)


def test_korthikanti_model_states_45_56_gib() -> None:
    # Figure 1 counts the 12 l h^2 transformer weights at 18 bytes each over 8 GPUs (22B, TP8)
    params = 12 * GPT22B.layers * GPT22B.hidden**2 / 8
    assert model_state_bytes(params, 1, grad_bytes=4).total_bytes / GIB == pytest.approx(
        45.56, abs=0.01
    )


def test_activation_formula_without_parallelism_is_34_plus_5as_over_h() -> None:
    a = GPT22B
    s, b, h = a.seq_len, 2, a.hidden
    expected = s * b * h * (34 + 5 * a.heads * s / h)
    assert layer_activation_bytes(a, b) == pytest.approx(expected)


def test_activation_formula_with_tensor_parallelism() -> None:
    a, t = GPT22B, 8
    s, b, h = a.seq_len, 1, a.hidden
    expected = s * b * h * (10 + 24 / t + 5 * a.heads * s / (h * t))
    assert layer_activation_bytes(a, b, tp=t) == pytest.approx(expected)
    sp_sel = layer_activation_bytes(a, b, tp=t, sequence_parallel=True, recompute="selective")
    assert sp_sel == pytest.approx(34 * s * b * h / t)
    assert layer_activation_bytes(a, b, recompute="full") == pytest.approx(2 * s * b * h)


def test_flash_attention_keeps_no_scores() -> None:
    flash = layer_activation_bytes(GPT22B, 1, flash_attention=True)
    selective = layer_activation_bytes(GPT22B, 1, recompute="selective")
    assert flash == pytest.approx(selective)


@pytest.mark.parametrize(
    ("arch", "par", "plain_gib", "sp_selective_gib"),
    [
        (GPT22B, Parallelism(tp=8, micro_batch=4, global_batch=4), 59.25, 9.56),
        (
            GPT175B,
            Parallelism(tp=8, pp=8, micro_batch=1, global_batch=64, interleave=3),
            66.84,
            12.35,
        ),
    ],
)
def test_korthikanti_figure_1_activations(
    arch: LlmArch, par: Parallelism, plain_gib: float, sp_selective_gib: float
) -> None:
    plain = estimate_memory(arch, dataclasses.replace(par, flash_attention=False), A100)
    sel = dataclasses.replace(
        par, flash_attention=False, recompute="selective", sequence_parallel=True
    )
    assert plain.activations_bytes / GIB == pytest.approx(plain_gib, abs=0.01)
    assert estimate_memory(arch, sel, A100).activations_bytes / GIB == pytest.approx(
        sp_selective_gib, abs=0.01
    )


def test_first_stage_holds_min_p_m_micro_batches() -> None:
    assert in_flight_layers(96, 8, 1, 64) == pytest.approx(96)
    assert in_flight_layers(96, 8, 1, 2) == pytest.approx(24)
    assert in_flight_layers(96, 8, 3, 64) == pytest.approx(96 * (1 + 7 / 24))


def test_gpt3_175b_does_not_fit_on_one_node_with_tp8() -> None:
    par = Parallelism(tp=8, pp=1, dp=1, micro_batch=1, global_batch=1, recompute="full")
    est = estimate_memory(GPT175B, par, GPUS["H100-SXM-80GB"])
    assert not est.fits
    assert est.needed_bytes > est.available_bytes
    assert est.dominant == "optimizer state"
    assert "does not fit" in est.reason
    # Megatron splits the vocabulary over TP ranks but replicates the position table
    positions = GPT175B.seq_len * GPT175B.hidden
    expected = (GPT175B.params() - positions) * 2 / 8 + positions * 2
    assert est.states.weights_bytes == pytest.approx(expected, rel=1e-3)


def test_more_pipeline_stages_need_less_memory() -> None:
    base = Parallelism(tp=8, micro_batch=1, global_batch=64, recompute="selective")
    small = estimate_memory(GPT175B, dataclasses.replace(base, pp=16), A100)
    large = estimate_memory(GPT175B, dataclasses.replace(base, pp=4), A100)
    assert small.needed_bytes < large.needed_bytes
    assert small.fits


def test_h100_capacity_is_what_torch_reports() -> None:
    # torch total_memory of an "80 GB" H100: 81,082 MiB = 85.02e9 bytes (issue 15: 85.0e9)
    from railyard.twin.memory import capacity_bytes

    h100 = GPUS["H100-SXM-80GB"]
    assert capacity_bytes(h100, "H100-SXM-80GB") == pytest.approx(85.0e9, rel=1e-3)
    assert capacity_bytes(h100) == pytest.approx(85.0e9, rel=2e-3)  # 80 GiB less 1%


def test_unfused_loss_holds_8_s_b_v_bytes_at_the_peak_of_backward() -> None:
    # issue 15: 0.84 GB per micro-batch at s 2048, V 51200 with PyTorch's fp32 cross-entropy
    arch = PRESETS["megatron-1.7b"]
    eager = Parallelism(micro_batch=1, global_batch=1, implementation="eager")
    est = estimate_memory(arch, eager, GPUS["H100-SXM-80GB"])
    assert est.loss_temp_bytes == pytest.approx(8 * 2048 * 51200)
    assert est.loss_temp_bytes / 1e9 == pytest.approx(0.84, abs=0.005)
    fused = dataclasses.replace(eager, implementation="megatron-te")
    assert estimate_memory(arch, fused, GPUS["H100-SXM-80GB"]).loss_temp_bytes == 0.0


def test_each_stage_reports_layers_only_and_with_tables() -> None:
    par = Parallelism(tp=8, pp=4, micro_batch=1, global_batch=64)
    est = estimate_memory(GPT175B, par, A100)
    first, middle, last = est.stages[0], est.stages[1], est.stages[3]
    assert first.layer_states == middle.layer_states  # same 24 layers
    assert middle.table_states.total_bytes == 0.0
    table = GPT175B.vocab * GPT175B.hidden / 8 + GPT175B.seq_len * GPT175B.hidden
    assert first.table_states.weights_bytes == pytest.approx(table * 2)
    assert last.logits_bytes > 0
    assert first.logits_bytes == 0.0
    assert [s.layers for s in est.stages] == [24, 24, 24, 24]


def test_uneven_stages_hold_their_own_layers() -> None:
    stages = (7,) + (8,) * 14 + (7,)
    par = Parallelism(tp=8, pp=16, micro_batch=1, global_batch=16, stage_layers=stages)
    est = estimate_memory(PRESETS["llama3-405b"], par, GPUS["H100-SXM-80GB"])
    assert [s.layers for s in est.stages] == list(stages)
    assert est.stages[0].activations_bytes < est.stages[1].activations_bytes


def test_interleaved_first_stage_matches_korthikanti() -> None:
    from railyard.twin.memory import in_flight_micro_batches

    # 2(p - 1) + (v - 1) p + 1 chunks of L/(p v) layers = p (1 + (p - 1)/(p v)) micro-batches
    assert in_flight_micro_batches(0, 8, 3, 64) == pytest.approx(8 * (1 + 7 / 24))
    assert in_flight_micro_batches(7, 8, 1, 64) == 1
    assert in_flight_micro_batches(0, 16, 4, 16) == 16  # never more than the m v chunks


def test_llama3_405b_as_published_fits_on_h100() -> None:
    # Dubey et al. 2024: TP8 PP16 DP128, 8K tokens, no activation checkpointing, one layer fewer
    # on the first and last stage, FSDP sharding gradients and optimizer state (ZeRO-2)
    par = Parallelism(
        tp=8, pp=16, dp=128, micro_batch=1, global_batch=2048, sequence_parallel=True,
        zero_stage=2, stage_layers=(7,) + (8,) * 14 + (7,),
    )  # fmt: skip
    est = estimate_memory(PRESETS["llama3-405b"], par, GPUS["H100-SXM-80GB"],
                          gpu_name="H100-SXM-80GB")  # fmt: skip
    assert est.fits, est.reason
    # why it was reported as not fitting: Megatron's distributed optimizer keeps the fp32
    # gradients unsharded (13 GiB more) and an even split puts 8 layers on the first stage
    megatron = dataclasses.replace(par, zero_stage=0, distributed_optimizer=True, stage_layers=())
    assert not estimate_memory(PRESETS["llama3-405b"], megatron, GPUS["H100-SXM-80GB"]).fits


def test_a_middle_stage_is_what_published_per_gpu_states_count() -> None:
    """Korthikanti et al. Figure 1 gives GPT-3 175B at TP8 PP8 45.56 GiB of model states per
    GPU: a middle stage's twelve layers. The first stage adds the embedding tables; the
    estimate keeps both, and names which is which."""
    par = Parallelism(tp=8, pp=8, micro_batch=1, global_batch=64, interleave=3)
    mem = estimate_memory(GPT175B, dataclasses.replace(par, flash_attention=False), A100)
    assert mem.stage == "first stage"
    assert mem.middle_states.total_bytes / GIB == pytest.approx(45.56, rel=0.001)
    assert mem.states.total_bytes > mem.middle_states.total_bytes + GIB  # + the tables
    alone = estimate_memory(GPT22B, Parallelism(tp=8, micro_batch=4, global_batch=4), A100)
    assert alone.middle_states == alone.states  # one stage: no middle one
