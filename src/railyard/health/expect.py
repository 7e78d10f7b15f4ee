"""What the twin says a node of a given GPU flavor should measure: the expectations the GPU
checks are judged against (no baseline needed; a node declared as a faster part than it is
fails). Each figure names its source.

- bf16 GEMM: the kernel model (`twin.kernels`): the datasheet's dense bf16 rate (catalogue,
  NVIDIA H100/H200/B200 datasheets) times the maximum achievable matmul fraction measured by
  the MAMF finder (Bekman, ml-engineering), in waves of output tiles over the SMs.
- all_reduce within a node: the collective model (`twin.collective`) for one node of that
  flavor behind its NVLink (NCCL's ring or NVLS, whichever the model picks), at nccl-tests'
  bus bandwidth definition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from railyard.blueprint import Blueprint
from railyard.blueprint.catalog import GPUS, GpuSpec
from railyard.blueprint.pools import gpu_of
from railyard.fabric.model import FabricError
from railyard.health.result import Expected as Expected  # its home; named here as before
from railyard.twin.collective import CollectiveModel
from railyard.twin.kernels import kernel_model, mamf_fraction_of
from railyard.twin.reference import single_node_blueprint

GEMM_N = 8192  # an 8192^3 GEMM: large enough to fill every SM (MAMF finder's range)
ALLREDUCE_BYTES = 1 << 30  # 1 GiB: nccl-tests' plateau, where bus bandwidth is quoted


class UnknownFlavor(ValueError):
    """No catalogue entry for the flavor: nothing to expect (the check skips, saying so)."""


def _spec(flavor: str) -> GpuSpec:
    spec = GPUS.get(flavor)
    if spec is None:
        known = ", ".join(sorted(GPUS))
        raise UnknownFlavor(f"no twin figures for flavor {flavor!r} (known: {known})")
    return spec


def gemm_tflops(flavor: str, n: int = GEMM_N) -> Expected:
    """The twin's bf16 GEMM rate of one GPU of `flavor` for an n x n x n product, TFLOP/s."""
    flavor = gpu_of(flavor)  # a pooled flavor's GPU model
    spec = _spec(flavor)
    model = kernel_model(flavor, spec.bf16_dense_tflops, spec.mem_bw_tbyte_s, node_busy=False)
    value = 2.0 * n**3 / model.gemm_s(n, n, n) / 1e12
    source = (
        f"twin: {flavor} {n}^3 bf16 GEMM ({spec.bf16_dense_tflops:g} TFLOP/s dense x MAMF "
        f"fraction {mamf_fraction_of(flavor):g}, burst clocks)"
    )
    return Expected(value, source)


def allreduce_busbw_gbps(flavor: str, gpus: int, size_bytes: int = ALLREDUCE_BYTES) -> Expected:
    """The twin's all_reduce bus bandwidth over the `gpus` GPUs of one node, GB/s."""
    flavor = gpu_of(flavor)
    _spec(flavor)
    if gpus < 2:
        raise UnknownFlavor("an all_reduce within a node needs 2 GPUs or more")
    model = CollectiveModel(single_node_blueprint(flavor, gpus))
    value = model.busbw_gbyte_s("all_reduce", size_bytes, 1, gpus)
    source = f"twin: all_reduce of {size_bytes >> 20} MiB over {gpus} x {flavor} in one node"
    return Expected(value, source)


def group_busbw_gbps(
    model: CollectiveModel, nodes: list[int], gpus_per_node: int, size_bytes: int = ALLREDUCE_BYTES
) -> Expected:
    """The twin's all_reduce bus bandwidth over these fabric nodes (indices), every GPU of
    each: what a pairwise or group test across nodes is judged against (its placement on the
    fabric decides it: a pair under one leaf differs from a pair across the spine)."""
    value = model.busbw_gbyte_s(
        "all_reduce", size_bytes, len(nodes), gpus_per_node, placement=nodes
    )
    names = [model.fabric.nodes[i].name for i in nodes]
    source = f"twin: all_reduce of {size_bytes >> 20} MiB over {', '.join(names[:4])}"
    if len(names) > 4:
        source += f" (+{len(names) - 4})"
    return Expected(value, source)


def group_expectation(blueprint: Blueprint) -> Callable[[Sequence[str], int], Expected | None]:
    """What an across-node test of named nodes expects on `blueprint`'s fabric (None for a
    group the twin cannot place: a node not in the blueprint, a flavor it has no figures
    for, a test with one rank per node and no GPUs; every group of a blueprint without a
    ``fabric:`` section)."""
    try:
        model = CollectiveModel(blueprint)
    except (KeyError, ValueError, FabricError) as exc:  # no fabric, or one the model lacks
        reason = str(exc)
        return lambda _group, _gpus: _none(reason)
    index = {node.name: i for i, node in enumerate(model.fabric.nodes)}

    def expect(group: Sequence[str], gpus_per_node: int) -> Expected | None:
        if gpus_per_node < 1 or any(name not in index for name in group):
            return None
        return group_busbw_gbps(model, [index[name] for name in group], gpus_per_node)

    return expect


def _none(_reason: str) -> Expected | None:
    return None
