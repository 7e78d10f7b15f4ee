"""One MoE layer against Megatron-LM's own MoE-layer benchmark, the dispatchers' permutes, and
the published MoE rows of three publishers."""

from __future__ import annotations

import dataclasses

import pytest
from tests.twin.test_spec import MIXTRAL

from railyard.blueprint.catalog import GPUS
from railyard.twin.bands import MOE_BAND, MOE_LAYER_BAND, band_keys
from railyard.twin.holdout import held_out
from railyard.twin.kernels import kernel_model
from railyard.twin.models import Parallelism
from railyard.twin.moe import PERMUTE_BYTES_PER_COPY_ELEMENT, groups_hit, moe_work
from railyard.twin.sources import source_key
from railyard.twin.spec import SpecError, arch_from_fields
from railyard.twin.validate import shipped_reference, validate_all
from railyard.twin.validate_moe import predict_moe_layer

H100 = GPUS["H100-SXM-80GB"]
KM = kernel_model("H100-SXM-80GB", H100.bf16_dense_tflops, H100.mem_bw_tbyte_s)
LAYER_ROWS = [f"g{i}" for i in range(23, 35)]


def _rows(*ids: str) -> list[dict[str, str]]:
    by_id = {r["id"]: r for r in shipped_reference()}
    return [by_id[i] for i in ids]


def test_deepep_and_hybridep_permute_once_on_the_received_side() -> None:
    arch = arch_from_fields({**MIXTRAL, "experts": 32, "top_k": 8, "capacity_factor": 1})
    a2a = Parallelism(dp=8, ep=8, global_batch=8)
    plain = moe_work(arch, a2a, KM, 4096)
    for name in ("deepep", "hybridep"):
        dedup = moe_work(arch, dataclasses.replace(a2a, dispatcher=name), KM, 4096)
        # Megatron's alltoall permutes before and after the exchange; these dispatch
        # unpermuted tokens and permute what arrived: fewer kernels and bytes
        assert dedup.fwd_stream_kernels == plain.fwd_stream_kernels - 4
        assert dedup.fwd_stream_s < plain.fwd_stream_s
        assert dedup.expert_gemm_s == pytest.approx(plain.expert_gemm_s)
    # the received side reads each arriving vector once and writes one copy per local expert
    dedup = moe_work(arch, dataclasses.replace(a2a, dispatcher="deepep"), KM, 4096)
    routed, h = dedup.routed_tokens, arch.hidden
    two_way = KM.stream_s((4096 * 8 + routed) * h * PERMUTE_BYTES_PER_COPY_ELEMENT)
    one_way = KM.stream_s((4096 * groups_hit(32, 8, 8) + routed) * h * 2.0)
    # permute and un-permute, forward
    assert plain.fwd_stream_s - dedup.fwd_stream_s == pytest.approx(2 * (two_way - one_way))


def test_the_dispatcher_reaches_the_layer_priced_in_a_training_step() -> None:
    # the per-micro-batch work is cached on a key of the split's fields; the dispatcher is
    # one of them now that it changes the permutes
    (row,) = _rows("t34")
    assert "dispatcher=deepep" in row["params"]
    plain = dict(row, params=row["params"].replace("dispatcher=deepep;", ""))
    (dedup,), (a2a,) = validate_all([row]), validate_all([plain])
    assert dedup.predicted != pytest.approx(a2a.predicted, rel=1e-3)


def test_moe_layer_rows_are_their_own_band_and_land_within_thirty_percent() -> None:
    rows = _rows(*LAYER_ROWS)
    checks = validate_all(rows)
    assert [c.row_id for c in checks] == LAYER_ROWS
    by_id = {r["id"]: r for r in rows}
    for c in checks:
        assert band_keys(c, by_id[c.row_id]) == [MOE_LAYER_BAND]
        # the layer alone, large experts, a node of H100: the twin's MoE kernels and
        # all-to-all within 30% of Megatron-LM's moe_perf timings (BF16 priced slow)
        assert abs(c.error) < 0.30, (c.row_id, c.error)
    bf16 = [c.error for c in checks if "precision=bf16" in by_id[c.row_id]["params"]]
    assert max(bf16) < 0  # BF16 GEMMs at the all-busy sustained rate: the twin is slow


def test_an_moe_layer_row_names_a_missing_field() -> None:
    (row,) = _rows("g23")
    broken = dict(row, params=row["params"].replace("top_k=2;", ""))
    with pytest.raises(SpecError, match="top_k"):
        predict_moe_layer(broken, object())  # type: ignore[arg-type]


def test_moe_training_rows_come_from_three_publishers_and_are_judged_held_out() -> None:
    table = shipped_reference()
    by_id = {r["id"]: r for r in table}
    moe_ids = [r["id"] for r in table if r["kind"] == "training" and "experts=" in r["params"]]
    sources = {source_key(by_id[i], by_id) for i in moe_ids}
    assert sources == {
        "NVIDIA-NeMo/Megatron-Bridge", "NVIDIA/Megatron-LM", "yanring/Megatron-MoE-ModelZoo",
    }  # fmt: skip
    checks = validate_all([by_id[i] for i in moe_ids])
    (moe,) = [h for h in held_out(checks, table) if h.kind == MOE_BAND]
    assert moe.sources == 3
    assert moe.judged == len(moe_ids)  # every source judged by a band made without it


def test_cross_node_expert_parallel_rows_land_near_and_in_node_rows_do_not() -> None:
    # the pattern the MoE miss cause names: EP over nodes within 20%, EP inside a node fast
    checks = {c.row_id: c.error for c in validate_all(_rows("t42", "t43", "t44", "t41", "t45"))}
    for cross in ("t42", "t43", "t44"):
        assert abs(checks[cross]) < 0.20, (cross, checks[cross])
    for inside in ("t41", "t45"):
        assert checks[inside] > 0.20, (inside, checks[inside])
