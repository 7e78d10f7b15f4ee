"""The GPU checks' expectations come from the twin, and the twin agrees with published
measurements; a node declared as a faster part than it is fails. The measurements themselves
need CUDA: here they skip with the reason (CI has no GPU)."""

from __future__ import annotations

import pytest

from railyard.health import expect
from railyard.health.checks import Context, run_checks
from railyard.health.result import Status, judge
from railyard.twin.validate import shipped_reference

ROWS = {row["id"]: row for row in shipped_reference()}


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("g04", lambda: expect.gemm_tflops("H100-SXM-80GB", 8192)),  # torch bf16 8192^3
        ("c02", lambda: expect.allreduce_busbw_gbps("H100-SXM-80GB", 8, 1 << 30)),  # NVLS
        ("c07", lambda: expect.allreduce_busbw_gbps("A100-SXM-80GB", 8, 8 << 30)),
    ],
)
def test_the_twins_expectation_is_near_the_published_figure(row: str, expected) -> None:
    published = float(ROWS[row]["value"])
    found = expected()
    assert 0.9 < published / found.value < 1.15, (published, found)
    assert found.source.startswith("twin: ")


def test_a_part_declared_faster_than_it_is_fails_against_the_twin() -> None:
    h100_measured = float(ROWS["g04"]["value"])  # a real H100's 8192^3 bf16 rate
    as_b200 = expect.gemm_tflops("B200-SXM-180GB", 8192)
    result = judge("gpu-gemm", "n1", h100_measured, as_b200.value, "TFLOP/s",
                   fail_below=0.8, warn_below=0.9, source=as_b200.source)  # fmt: skip
    assert result.status is Status.FAIL
    as_h100 = expect.gemm_tflops("H100-SXM-80GB", 8192)
    assert judge("gpu-gemm", "n1", h100_measured, as_h100.value, "TFLOP/s",
                 fail_below=0.8, warn_below=0.9, source="").status is Status.PASS  # fmt: skip


@pytest.mark.parametrize("check", ["gpu-gemm", "nccl-allreduce"])
def test_gpu_checks_without_a_flavor_or_a_known_one_skip_saying_why(check: str) -> None:
    [none] = run_checks([check], Context("n1"))
    assert none.status is Status.SKIP
    assert "--flavor" in none.detail
    [unknown] = run_checks([check], Context("n1", flavor="virtual", declared_gpus=2))
    assert unknown.status is Status.SKIP
    assert unknown.detail.startswith("no twin figures for flavor 'virtual'")


@pytest.mark.parametrize("check", ["gpu-gemm", "nccl-allreduce"])
def test_gpu_checks_on_this_machine(check: str) -> None:
    [result] = run_checks([check], Context("here", flavor="H100-SXM-80GB", declared_gpus=8))
    if result.status is Status.SKIP:
        assert result.detail  # why: no torch, no CUDA device, one GPU
        pytest.skip(f"{check}: {result.detail}")
    assert result.expected is not None
    assert result.source.startswith("twin: ")


def test_a_pair_across_nodes_is_judged_against_its_placement_on_the_fabric() -> None:
    from railyard.blueprint import load
    from railyard.twin.collective import CollectiveModel

    model = CollectiveModel(load("a3-mega").blueprint)  # seed 004's cluster, 8x200G per node
    found = expect.group_busbw_gbps(model, [0, 1], 8, 8 << 30)
    published = float(ROWS["c10"]["value"])  # 2 x 8 H100 A3 Mega, 8 GiB
    assert 0.85 < published / found.value < 1.15, (published, found)
    names = [n.name for n in model.fabric.nodes[:2]]
    assert found.source == f"twin: all_reduce of 8192 MiB over {names[0]}, {names[1]}"
