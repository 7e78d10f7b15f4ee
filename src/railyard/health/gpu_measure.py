"""GPU measurements (torch with CUDA): bf16 GEMM rate per GPU, NCCL all_reduce within a node.

Each raises `Unavailable` where it cannot run (no torch, no CUDA, fewer than two GPUs for the
all_reduce), so its check skips with the reason. Timing follows nccl-tests and the MAMF
finder: warm up, then the best of a few timed windows, CUDA events around the kernels.
"""

from __future__ import annotations

import os
from typing import Any

from railyard.health.across import busbw_gbps
from railyard.health.measure import run_child, spawned_ranks_t_s


def in_child(name: str, timeout_s: float = 300.0) -> Any:
    """Run measurement `name` in a fresh interpreter (no CUDA context left in the caller)."""
    return run_child(__name__, name, timeout_s=timeout_s, env=dict(os.environ))


def _cuda() -> Any:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("unavailable: no CUDA device (torch sees none)")
    return torch


def gemm_tflops_per_gpu(n: int = 8192, iters: int = 20, windows: int = 3) -> list[float]:
    """bf16 n x n x n matrix products on each GPU, TFLOP/s (2·n³ per product), best window."""
    torch = _cuda()
    rates = []
    for index in range(torch.cuda.device_count()):
        with torch.cuda.device(index):
            a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
            b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
            c = torch.empty_like(a)
            for _ in range(3):  # warm-up: cuBLAS picks its kernel
                torch.matmul(a, b, out=c)
            best_s = float("inf")
            for _ in range(windows):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(iters):
                    torch.matmul(a, b, out=c)
                end.record()
                torch.cuda.synchronize()
                best_s = min(best_s, start.elapsed_time(end) / 1e3 / iters)
            rates.append(2.0 * n**3 / best_s / 1e12)
    return rates


def _nccl_rank(rank: int, world: int, port: int, size_bytes: int, out: str) -> None:
    import time

    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        data = torch.ones(size_bytes // 2, dtype=torch.bfloat16, device="cuda")
        for _ in range(5):
            dist.all_reduce(data)
        torch.cuda.synchronize()
        best_s = float("inf")
        for _ in range(3):
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(10):
                dist.all_reduce(data)
            torch.cuda.synchronize()
            best_s = min(best_s, (time.perf_counter() - t0) / 10)
        if rank == 0:
            with open(out, "w", encoding="utf-8") as f:
                f.write(repr(best_s))
    finally:
        dist.destroy_process_group()


def nccl_allreduce_busbw_gbps(size_bytes: int = 1 << 30) -> float:
    """all_reduce bus bandwidth over every GPU of this node with NCCL, GB/s (nccl-tests'
    busbw = bytes / time x 2(n-1)/n)."""
    torch = _cuda()
    world = int(torch.cuda.device_count())
    if world < 2:
        raise RuntimeError("unavailable: an all_reduce within a node needs 2 GPUs or more")
    t_s = spawned_ranks_t_s(_nccl_rank, world, (size_bytes,), timeout_s=240, what="nccl")
    return busbw_gbps(size_bytes, t_s, world)
