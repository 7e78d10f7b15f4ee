"""Network stacks' fixed costs (GPUDirect-TCPXO/TCPX against RDMA) and harness overhead."""

from __future__ import annotations

import pytest

from railyard.twin.collective import HARNESS_US, CollectiveModel
from railyard.twin.reference import net_stack_of, reference_blueprint

A3_MEGA = {"id": "x", "setup": "2 nodes x 8 H100 (Google A3 Mega)", "nodes": "2", "gpus": "16",
           "gpu": "H100-SXM-80GB", "fabric": "8x200G ethernet rail"}  # fmt: skip


def _models() -> tuple[CollectiveModel, CollectiveModel]:
    bp = reference_blueprint(A3_MEGA)
    return CollectiveModel(bp, stack="tcpxo"), CollectiveModel(bp, stack="rdma")


def test_a3_mega_rows_run_over_tcpxo() -> None:
    assert net_stack_of(A3_MEGA) == "tcpxo"
    assert net_stack_of({"setup": "DGX A100", "fabric": "8x200G infiniband rail"}) == "rdma"


def test_tcpxo_has_the_published_floor_for_tiny_messages() -> None:
    tcpxo, rdma = _models()
    # the published 2-node sweep: 123 us at 8 bytes
    assert tcpxo.time_s("all_reduce", 8, 2, 8) * 1e6 == pytest.approx(123, rel=0.1)
    assert rdma.time_s("all_reduce", 8, 2, 8) * 1e6 < 100


def test_tcpxo_pays_a_buffer_fill_that_fades_at_large_sizes() -> None:
    tcpxo, rdma = _models()
    mid = tcpxo.time_s("all_reduce", 128 * 2**20, 2, 8) / rdma.time_s(
        "all_reduce", 128 * 2**20, 2, 8
    )
    big = tcpxo.time_s("all_reduce", 8 * 2**30, 2, 8) / rdma.time_s("all_reduce", 8 * 2**30, 2, 8)
    assert mid > 1.5
    assert big < mid


def test_a_sweep_agrees_with_single_calls_under_tcpxo() -> None:
    tcpxo, _ = _models()
    for row in tcpxo.sweep("all_reduce", 8, 1 << 30, 64, 2, 8):
        assert row.time_us == pytest.approx(tcpxo.time_s("all_reduce", row.size_bytes, 2, 8) * 1e6)


def test_harness_overhead_is_kept_apart_from_the_collective() -> None:
    tcpxo, _ = _models()
    alone = tcpxo.time_s("all_reduce", 2**20, 1, 8)
    called = tcpxo.call_time_s("all_reduce", 2**20, 1, 8)
    assert called - alone == pytest.approx(HARNESS_US["torch.distributed"] * 1e-6)
    assert tcpxo.call_time_s("all_reduce", 2**20, 1, 8, harness="nccl-tests") == alone
    with pytest.raises(ValueError, match="harness"):
        tcpxo.call_time_s("all_reduce", 2**20, 1, 8, harness="mpi")
    with pytest.raises(ValueError, match="network stack"):
        CollectiveModel(reference_blueprint(A3_MEGA), stack="ucx")
