"""Mixture-of-experts as its own layer: router, permutes, grouped GEMMs, imbalance, EP > DP,
MLA and sliding windows, and the published MoE rows the twin must land near."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from tests.twin.test_spec import MIXTRAL
from tests.twin.test_train import FakeComm

from railyard.blueprint.catalog import GPUS
from railyard.twin.kernels import kernel_model
from railyard.twin.models import Parallelism
from railyard.twin.moe import (
    GROUPED_GEMM_STREAMS,
    MOE_IMBALANCE_DEFAULT,
    alltoall_bytes,
    dispatch_s,
    grouped_gemm_s,
    groups_hit,
    moe_work,
)
from railyard.twin.spec import SpecError, arch_from_fields, split_from_fields
from railyard.twin.train import estimate_step
from railyard.twin.validate import shipped_reference, validate_all

H100 = GPUS["H100-SXM-80GB"]
KM = kernel_model("H100-SXM-80GB", H100.bf16_dense_tflops, H100.mem_bw_tbyte_s)
QWEN3_235B = {
    "layers": 94, "hidden": 4096, "heads": 64, "kv_heads": 4, "kv_channels": 128,
    "experts": 128, "top_k": 8, "moe_ffn_hidden": 1536, "ffn_kind": "swiglu",
    "vocab": 151936, "seq_len": 4096, "positions": "rope", "biases": False, "dropout": False,
    "tied_embeddings": False,
}  # fmt: skip


def test_router_and_permutes_are_priced_even_on_one_rank() -> None:
    arch = arch_from_fields(MIXTRAL)
    one = moe_work(arch, Parallelism(), KM, 4096)
    # router logits (tokens x 8 experts, fp32) and the permute/un-permute of 2 copies a token
    assert one.fwd_stream_s > KM.stream_s(4096 * 2 * 4096 * 4.0 * 2)
    assert one.fwd_stream_kernels >= 6 + 4
    more = moe_work(dataclasses.replace(arch, experts=64), Parallelism(), KM, 4096)
    assert more.fwd_stream_s > one.fwd_stream_s  # more router logits to softmax and sort


def test_small_per_expert_batches_run_below_the_dense_rate() -> None:
    arch = arch_from_fields({**MIXTRAL, "experts": 128, "top_k": 1, "capacity_factor": 1})
    par = Parallelism(dp=1)
    big = moe_work(dataclasses.replace(arch, experts=2), par, KM, 8192)
    small = moe_work(arch, par, KM, 8192)  # 64 tokens per expert: a quarter of a 256 tile
    flops = 2 * 3 * 8192 * arch.mlp_matmul_params()  # same routed FLOPs either way
    rate_big = flops / big.expert_gemm_s
    rate_small = flops * 1 / small.expert_gemm_s
    assert rate_small < 0.6 * rate_big


def test_grouped_gemm_runs_te_streams_worth_of_experts_at_a_time() -> None:
    # TE on Hopper: one cuBLAS GEMM per expert on 4 compute streams; 16 experts are 4 groups
    # of 4 that share the SMs' waves, 18 experts 4 groups and a group of 2
    assert GROUPED_GEMM_STREAMS == 4
    m, n, k = 1024.0, 5760.0, 2880.0
    four = KM.gemm_s(m, n, k, batch=4)
    assert grouped_gemm_s(KM, m, n, k, 16) == pytest.approx(4 * four)
    assert grouped_gemm_s(KM, m, n, k, 18) == pytest.approx(4 * four + KM.gemm_s(m, n, k, 2))
    # a partial last wave is paid per group, so the groups are never faster than one batch
    assert grouped_gemm_s(KM, m, n, k, 16) >= KM.gemm_s(m, n, k, batch=16)
    assert grouped_gemm_s(KM, m, n, k, 1) == pytest.approx(KM.gemm_s(m, n, k))


def test_imbalance_slows_the_busiest_rank_and_its_all_to_all() -> None:
    even = arch_from_fields({**MIXTRAL, "capacity_factor": 1})
    skewed = arch_from_fields({**MIXTRAL, "capacity_factor": 1.5})
    par = Parallelism(dp=8, ep=8, global_batch=8)
    a, b = moe_work(even, par, KM, 4096), moe_work(skewed, par, KM, 4096)
    assert b.expert_gemm_s / a.expert_gemm_s == pytest.approx(1.5, rel=0.05)
    assert alltoall_bytes(skewed, par, 4096) == pytest.approx(1.5 * alltoall_bytes(even, par, 4096))
    default = arch_from_fields(MIXTRAL)
    assert alltoall_bytes(default, par, 4096) == pytest.approx(
        MOE_IMBALANCE_DEFAULT * alltoall_bytes(even, par, 4096)
    )


def test_the_host_sync_on_token_counts_costs_one_launch_per_layer_with_ep() -> None:
    arch = arch_from_fields(MIXTRAL)
    assert moe_work(arch, Parallelism(dp=8, ep=8, global_batch=8), KM, 4096).host_syncs == 1
    assert moe_work(arch, Parallelism(), KM, 4096).host_syncs == 0


def test_fp8_casts_each_local_expert() -> None:
    arch = arch_from_fields(MIXTRAL)
    fp8 = kernel_model("H100-SXM-80GB", H100.bf16_dense_tflops, H100.mem_bw_tbyte_s, fp8=True)
    par = Parallelism(dp=2, ep=2, global_batch=2)
    assert moe_work(arch, par, fp8, 4096).fwd_stream_kernels == (
        moe_work(arch, par, KM, 4096).fwd_stream_kernels + 2 * 4
    )


def test_ep_may_exceed_dp_when_experts_are_not_tensor_split() -> None:
    arch = arch_from_fields(QWEN3_235B)
    par = split_from_fields({"tp": 2, "pp": 8, "dp": 16, "ep": 32, "etp": 1, "gbs": 2048})
    par.check(arch)
    assert par.expert_dp == 1
    with pytest.raises(ValueError, match="ep x etp"):
        dataclasses.replace(par, etp=2).check(arch)
    comm = FakeComm()
    estimate_step(arch, par, H100, 8, comm)
    a2a = [c for c in comm.calls if c[0] == "alltoall"]
    assert a2a
    assert a2a[0][2:] == (4, 8)  # 32 ranks one apart: 4 nodes of 8


def test_mla_counts_deepseek_v3_attention_weights() -> None:
    # DeepSeek-V3 (arXiv 2412.19437, section 4.2): h 7168, 128 heads, q rank 1536, kv rank 512,
    # per-head 128 (no rope) + 64 (rope) for q/k, 128 for v
    arch = arch_from_fields({"layers": 61, "hidden": 7168, "heads": 128, "kv_channels": 128,
                             "q_lora_rank": 1536, "kv_lora_rank": 512, "rope_head_dim": 64,
                             "v_head_dim": 128, "vocab": 129280, "seq_len": 4096})  # fmt: skip
    q = 7168 * 1536 + 1536 * 128 * 192
    kv = 7168 * (512 + 64) + 512 * 128 * (128 + 128)
    assert arch.attention_matmul_params() == q + kv + 128 * 128 * 7168
    with pytest.raises(SpecError, match="kv_lora_rank"):
        arch_from_fields({**MIXTRAL, "rope_head_dim": 64})


def test_sliding_windows_cut_attention_flops() -> None:
    full = arch_from_fields({**MIXTRAL, "seq_len": 8192})
    windowed = arch_from_fields({**MIXTRAL, "seq_len": 8192, "window": 128, "window_every": 2})
    score = 4.0 * full.heads * full.head_dim
    diff = full.layer_fwd_flops_per_token() - windowed.layer_fwd_flops_per_token()
    assert diff == pytest.approx(score * 0.5 * (8192 - 128))


@pytest.mark.parametrize("bad", ["0.5", "x", "nan"])
def test_a_bad_capacity_factor_names_the_field(bad: str) -> None:
    with pytest.raises(SpecError, match="capacity_factor"):
        arch_from_fields({**MIXTRAL, "capacity_factor": bad})


def test_published_moe_rows_with_cross_node_all_to_all_land_within_ten_percent() -> None:
    rows = [r for r in shipped_reference() if r["id"] in ("t30", "t33")]
    checks = validate_all(rows)
    assert len(checks) == 2
    for check in checks:
        assert abs(check.error) <= 0.10, (check.row_id, check.error)


def test_groups_hit_counts_the_distinct_nodes_a_token_reaches() -> None:
    # 128 experts over 2 nodes, top-8: the other node is missed only if all 8 land here
    miss = math.comb(64, 8) / math.comb(128, 8)
    assert groups_hit(128, 8, 2) == pytest.approx(2 * (1 - miss))
    assert groups_hit(128, 1, 8) == pytest.approx(1.0)  # one expert, one group
    assert groups_hit(128, 8, 1) == 1.0
    # never more groups than experts chosen, nor than groups
    assert groups_hit(128, 8, 128) == pytest.approx(8.0)
    assert groups_hit(128, 8, 4) < 4.0


def test_a_deduplicating_dispatcher_sends_a_token_once_per_node() -> None:
    arch = arch_from_fields(QWEN3_235B)
    sent: list[tuple[float, int, int]] = []

    def alltoall_s(size: float, nodes: int, gpn: int) -> float:
        sent.append((size, nodes, gpn))
        return size * 1e-9

    split = Parallelism(tp=1, dp=16, ep=16, etp=1)
    dispatch_s(arch, split, 4096, 2, 8, alltoall_s)
    ((copies, nodes, gpn),) = sent
    busiest = MOE_IMBALANCE_DEFAULT  # no capacity factor given: the default imbalance
    assert (nodes, gpn) == (2, 8)
    assert copies == pytest.approx(4096 * 8 * 4096 * 2.0 * busiest)
    sent.clear()
    dispatch_s(arch, dataclasses.replace(split, dispatcher="hybridep"), 4096, 2, 8, alltoall_s)
    by_nodes = {(n, g): size for size, n, g in sent}
    # over the network: one copy per node reached, not one per expert
    vector = 4096 * 4096 * 2.0 * busiest
    assert by_nodes[(2, 1)] == pytest.approx(vector * groups_hit(128, 8, 2))
    assert by_nodes[(2, 1)] < copies / 3.9
    # over NVLink: one copy per GPU reached
    assert by_nodes[(1, 8)] == pytest.approx(vector * groups_hit(128, 8, 16))


def test_hybridep_cuts_the_cross_node_all_to_all_of_the_ep16_row() -> None:
    row = next(r for r in shipped_reference() if r["id"] == "t27")
    assert "dispatcher=hybridep" in row["params"]
    plain = dict(row, params=row["params"].replace("dispatcher=hybridep;", ""))
    (fast,), (slow,) = validate_all([row]), validate_all([plain])
    assert fast.predicted > 1.3 * slow.predicted


def test_perf_train_takes_etp_so_ep_can_exceed_dp_and_prints_the_moe_band(tmp_path: Path) -> None:
    model = tmp_path / "qwen3.json"
    model.write_text(json.dumps(QWEN3_235B))
    args = [sys.executable, "-m", "railyard", "perf", "train", "rail-2048", "--model-file",
            str(model), "--tp", "2", "--pp", "8", "--dp", "16", "--ep", "32", "--global-batch",
            "2048", "--sequence-parallel", "--json"]  # fmt: skip
    refused = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    assert "ep x etp" in refused.stderr + refused.stdout
    done = subprocess.run([*args, "--etp", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["error_band"]["kind"] == "training (mixture of experts)"


def test_perf_train_takes_the_dispatcher_and_names_a_bad_one(tmp_path: Path) -> None:
    model = tmp_path / "qwen3.json"
    model.write_text(json.dumps(QWEN3_235B))
    args = [sys.executable, "-m", "railyard", "perf", "train", "rail-2048", "--model-file",
            str(model), "--tp", "2", "--pp", "8", "--dp", "16", "--ep", "32", "--etp", "1",
            "--global-batch", "2048", "--sequence-parallel", "--json"]  # fmt: skip
    rates = {}
    for dispatcher in ("alltoall", "hybridep"):
        done = subprocess.run([*args, "--dispatcher", dispatcher], capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        rates[dispatcher] = json.loads(done.stdout)["tokens_per_s"]
    # 32 expert ranks over 4 nodes: a token crosses to each node once, not once per expert
    assert rates["hybridep"] > rates["alltoall"]
    bad = subprocess.run([*args, "--dispatcher", "nccl"], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert bad.returncode == 2
    assert "dispatcher" in bad.stderr + bad.stdout


def test_a_host_bound_moe_forward_cannot_borrow_the_backwards_gpu_slack() -> None:
    # the token-count copy to the host drains the launch queue once per MoE forward, so a
    # forward whose launches outlast its kernels costs its host time, layer by layer, even
    # where the whole layer's GPU work exceeds its host work (issue 59)
    from railyard.twin.layer import Work
    from railyard.twin.train import stage_time_s

    fwd, bwd = Work(), Work()
    fwd.add("gemm", 0.5e-3, 100)  # 100 launches: 2 ms of host time for 0.5 ms of kernels
    bwd.add("gemm", 4e-3, 10)  # 0.2 ms of host time for 4 ms of kernels
    step = Work()
    step.extend(fwd)
    step.extend(bwd)
    busy_f = fwd.gpu_s + fwd.kernels * KM.gap_s
    busy_b = bwd.gpu_s + bwd.kernels * KM.gap_s
    assert fwd.kernels * KM.host_s > busy_f
    assert step.time_s(KM) == pytest.approx(busy_f + busy_b)  # the layer is GPU-bound
    pooled = stage_time_s(KM, 12, step, (), [])
    drained = stage_time_s(KM, 12, step, (fwd,), [])
    assert pooled == pytest.approx(12 * (busy_f + busy_b))
    assert drained == pytest.approx(12 * (fwd.kernels * KM.host_s + busy_b))
