"""Find the fastest ways to split a model over a number of GPUs.

A user asks "how should I run this model on 256 H100s?"; the answer is a short ranked list of
splits that fit in memory, each with its step time and why it is as fast as it is. The search
walks the space Megatron-LM users tune by hand (Narayanan et al. SC'21 section 3 gives the
heuristics: tensor parallelism inside a node, pipelines across nodes, the rest data parallel).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from railyard.blueprint.catalog import GpuSpec
from railyard.twin.memory import estimate_memory
from railyard.twin.models import LlmArch, Parallelism, Recompute
from railyard.twin.train import CommModel, StepEstimate, estimate_step

MICRO_BATCHES = (1, 2, 4, 8)
RECOMPUTE: tuple[Recompute, ...] = ("none", "selective", "full")
INTERLEAVE = (1, 2, 4)

# What the search does not vary: Megatron-Core defaults with its overlap flags on.
DEFAULT_BASE = Parallelism(
    flash_attention=True,
    overlap_tp_comm=True,
    overlap_dp_comm=True,
    overlap_pp_comm=True,
)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(
    arch: LlmArch,
    gpus: int,
    gpus_per_node: int,
    global_batch: int,
    base: Parallelism = DEFAULT_BASE,
) -> Iterator[Parallelism]:
    """Every split worth timing: TP within a node, PP dividing the layers, the rest DP."""
    for tp in _divisors(min(gpus_per_node, gpus)):
        if gpus % tp or arch.heads % tp:
            continue
        for pp in _divisors(gpus // tp):
            dp = gpus // (tp * pp)
            if pp > arch.layers or global_batch % dp:
                continue
            for mb in MICRO_BATCHES:
                if global_batch % (dp * mb):
                    continue
                m = global_batch // (dp * mb)
                for v in INTERLEAVE:
                    # Megatron's interleaved schedule needs m a multiple of p and L of p v
                    if v > 1 and (pp == 1 or m % pp or arch.layers % (pp * v)):
                        continue
                    for rc in RECOMPUTE:
                        for dist_opt in (True, False) if dp > 1 else (False,):
                            yield dataclasses.replace(
                                base,
                                tp=tp,
                                pp=pp,
                                dp=dp,
                                micro_batch=mb,
                                global_batch=global_batch,
                                interleave=v,
                                recompute=rc,
                                distributed_optimizer=dist_opt,
                                sequence_parallel=tp > 1,
                            )


def best_parallelism(
    arch: LlmArch,
    gpus: int,
    gpu: GpuSpec,
    gpus_per_node: int,
    comm: CommModel,
    global_batch: int,
    seq_len: int | None = None,
    *,
    top: int = 5,
    base: Parallelism = DEFAULT_BASE,
    gpu_name: str | None = None,
) -> list[StepEstimate]:
    """The ``top`` fastest splits that fit in memory, fastest first; empty when none fits."""
    if seq_len is not None and seq_len != arch.seq_len:
        arch = dataclasses.replace(arch, seq_len=seq_len)
    fitting: list[StepEstimate] = []
    for par in candidates(arch, gpus, gpus_per_node, global_batch, base):
        try:
            par.check(arch)
        except ValueError:
            continue
        if not estimate_memory(arch, par, gpu, gpu_name=gpu_name).fits:
            continue  # cheaper than the step: splits that do not fit are never timed
        fitting.append(estimate_step(arch, par, gpu, gpus_per_node, comm, gpu_name=gpu_name))
    fitting.sort(key=lambda e: (e.step_time_s, e.memory.needed_bytes))
    return fitting[:top]
